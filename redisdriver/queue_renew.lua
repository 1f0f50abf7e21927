-- Extend queued leases (waiter places, shared and permit holders) still
-- held by their owners.
-- KEYS[i] lock of lease i; ARGV[3i-2] id, ARGV[3i-1] ttl ms, ARGV[3i]
-- what the lease is: 'W' a waiter place, else 'H' .. mode.
-- Returns a string of one digit per lease: EXTENDED, or LOST when the
-- lease is not there any more (for a waiter: granted, or dropped).
local Q = queue_lib()
local q_keys, q_settle = Q.keys, Q.settle
local now, t = q_now_ms()
local held = {}
-- (Counted from ARGV: in a Cluster, KEYS goes on with the other keys the
-- call may touch, which the driver names so that the node can check them.)
for i = 1, #ARGV / 3 do
  local K = q_keys(KEYS[i])
  local id, what = ARGV[3 * i - 2], ARGV[3 * i]
  -- Settling first may grant this very waiter, which then answers LOST
  -- and learns of the grant with its next Enqueue.
  q_settle(K, now, t)
  local rec = Q.live(K, id, redis.call('HGET', K.d, id), now)
  if rec and string.sub(rec, 1, #what) == what then
    local ttl = tonumber(ARGV[3 * i - 1])
    local exp = now + ttl
    Q.core.extend(K.lock, exp, ttl)
    if string.byte(rec, 1) == 87 then -- 'W': a waiter's expiry is in its record
      redis.call('HSET', K.d, id, Q.moved(rec, exp))
    else
      redis.call('ZADD', K.e, exp, id)
    end
    held[i] = '__EXTENDED__'
  else
    held[i] = '__LOST__'
  end
end
return table.concat(held)

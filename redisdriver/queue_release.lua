-- Release queued leases, each if still held by its owner, and grant to the
-- queue heads that then fit.
-- KEYS[i] lock of lease i; ARGV[2i-1] id, ARGV[2i] what the lease is: 'W'
-- a waiter place (which releases its grant too, if it was granted
-- meanwhile), else 'H' .. mode.
-- Returns a string of one digit per lease: RELEASED, ALREADY_RELEASED or
-- NOT_HELD. A name left entirely free is published on its release
-- channel, for plain Lock's waiters.
local Q = queue_lib()
local q_keys, q_settle = Q.keys, Q.settle
local now, t = q_now_ms()
local res = {}
-- (Counted from ARGV: in a Cluster, KEYS goes on with the other keys the
-- call may touch, which the driver names so that the node can check them.)
for i = 1, #ARGV / 2 do
  local K = q_keys(KEYS[i])
  local id, what = ARGV[2 * i - 1], ARGV[2 * i]
  q_settle(K, now, t)
  local rec = Q.live(K, id, redis.call('HGET', K.d, id), now)
  if rec and (what == 'W' or string.sub(rec, 1, #what) == what) then
    -- Remembered until the lease would have expired, for a retry. (:e and
    -- :d never empty while the queue exists: see q_extend.)
    local exp
    if string.sub(rec, 1, 1) == 'H' then
      redis.call('HINCRBY', K.d, '#h', -1)
      exp = redis.call('ZSCORE', K.e, id)
      redis.call('ZREM', K.e, id)
      redis.call('HDEL', K.d, id)
    else
      local _
      _, exp = Q.core.waiter(rec)
      -- Out of the queue; deep in a long one, its record stays, expired,
      -- until its entry reaches an end (q_unqueue).
      Q.unqueue(K, id, rec, now)
    end
    redis.call('HSET', K.d, 'r:' .. id, '')
    redis.call('ZADD', K.e, exp, 'r:' .. id)
    res[i] = '__RELEASED__'
  elseif what == 'W' and owned(K.lock, id .. SEP) then
    -- Granted the exclusive lease while its waiter gave up: pass it on.
    keep_release(K.lock, K.last, redis.call('GET', K.last))
    redis.call('RENAME', K.lock, K.last)
    res[i] = '__RELEASED__'
  elseif redis.call('ZSCORE', K.e, 'r:' .. id) or (what == 'W' and released_by(K.lock, redis.call('GET', K.last), id .. SEP)) then
    res[i] = '__ALREADY_RELEASED__'
  else
    res[i] = '__NOT_HELD__'
  end
  if res[i] == '__RELEASED__' then
    if not q_settle(K, now, t) and redis.call('EXISTS', K.lock) == 0 then
      redis.call('PUBLISH', K.lock .. CHANNEL_SUFFIX, '')
    end
    -- No q_extend: a release makes no lease expire later.
  end
end
return table.concat(res)

-- Take several locks at once, all or none, and issue each its next
-- fencing token. All keys are in one Cluster slot (the driver checks).
-- KEYS[2i-1] lock i, KEYS[2i] its last released lock
-- ARGV[1] '1' when the caller will wait and needs the busy holder's PTTL,
-- else '0'; followed by 'a' when the caller sends WAIT after the call
-- (WithReplicaAck: a retry that finds its own locks writes them again, as
-- in acquire.lua);
-- for lock i: ARGV[3i-1] id prefix ("<id>" SEP), ARGV[3i] ttl ms,
-- ARGV[3i+1] the rest of the value (SEP "<since ms>" SEP "<owner JSON>")
-- Returns, when acquired, the tokens in order, separated by spaces (one
-- string: a table reply costs Redis more); when busy, the table
-- {i, PTTL of lock i} (PTTL is TTL_UNKNOWN when not asked for).
-- (Counted from ARGV: in a Cluster, KEYS goes on with the other keys the
-- call may touch, which the driver names so that the node can check them.)
local n = (#ARGV - 1) / 3
local waiting, rewrite = string.sub(ARGV[1], 1, 1) == '1', string.sub(ARGV[1], 2, 2) == 'a'
-- With the locks and their last releases, the same MGET reads the queue
-- markers (queue_lib.lua): a name with queued leases (fair waiters,
-- readers, permits) is not free, as in acquire.lua.
local names = {}
for i = 1, 2 * n do
  names[i] = KEYS[i]
end
for i = 1, n do
  names[2 * n + i] = KEYS[2 * i - 1] .. ':q'
end
local vals = redis.call('MGET', unpack(names)) -- lock i at 2i-1, its last at 2i, its marker at 2n+i

for i = 1, n do
  local v = vals[2 * i - 1]
  local byQueue = false
  if not v and vals[2 * n + i] then
    local Q = queue_lib()
    local now, t = q_now_ms()
    byQueue = Q.settle(Q.keys(KEYS[2 * i - 1]), now, t) or redis.call('EXISTS', KEYS[2 * i - 1]) == 1
  end
  if byQueue or (v and not owns(v, ARGV[3 * i - 1])) then
    -- Busy. Locks of ours are an earlier try of this same request whose
    -- reply was lost, partly undone since (one of its locks expired and
    -- was taken): release them as release.lua does, so that nothing of a
    -- refused request stays held.
    for j = 1, n do
      if owns(vals[2 * j - 1], ARGV[3 * j - 1]) then
        keep_release(KEYS[2 * j - 1], KEYS[2 * j], vals[2 * j])
        redis.call('RENAME', KEYS[2 * j - 1], KEYS[2 * j])
        redis.call('PUBLISH', KEYS[2 * j - 1] .. CHANNEL_SUFFIX, '')
      end
    end
    local pttl = __TTL_UNKNOWN__
    if waiting and not byQueue then
      pttl = note_waiting(KEYS[2 * i - 1], redis.call('PTTL', KEYS[2 * i - 1]), ARGV[3 * i])
    end
    return {i, pttl}
  end
end

-- Every lock is free or ours. Tokens are acquire.lua's hybrid logical
-- clock, per lock: max(token recorded in its last released lock + 1,
-- server TIME in microseconds); see there for why they always increase.
local t = redis.call('TIME')
local now = t[1] .. string.sub('00000' .. t[2], -6)
local toks = {}
for i = 1, n do
  local v, last = vals[2 * i - 1], vals[2 * i]
  if v then
    -- Ours: an earlier try of this same request took it. Same token;
    -- written again for the WAIT after it (see acquire.lua).
    toks[i] = (token_of(v, KEYS[2 * i - 1]))
    if rewrite then
      redis.call('SET', KEYS[2 * i - 1], v, 'PX', ARGV[3 * i])
    end
  else
    local tok = now
    if last then
      local _, prev = token_of(last, KEYS[2 * i])
      if prev >= tonumber(tok) then
        tok = string.format('%.0f', prev + 1)
      end
    end
    redis.call('SET', KEYS[2 * i - 1], ARGV[3 * i - 1] .. tok .. ARGV[3 * i + 1], 'PX', ARGV[3 * i])
    toks[i] = tok
  end
end
return table.concat(toks, ' ')

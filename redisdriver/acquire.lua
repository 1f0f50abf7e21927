-- Take the lock if it is free and issue the next fencing token, in one
-- script. Used the first time this driver acquires a lock name; later
-- acquisitions use a MULTI transaction of plain commands instead (see
-- acquire.go), which costs Redis much less than a script.
-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] lock value "<id>:<since ms>:<owner JSON>", ARGV[2] ttl ms
-- Returns {1, token} when acquired, {0, pttl} when busy.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Our own value means an earlier try of this same request took the lock
  -- and its reply was lost (the client library retried): it is ours.
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  end
end
local token = redis.call('INCR', KEYS[2])
if token < UNSEEDED then
  token = seed(KEYS[2])
end
return {1, token}

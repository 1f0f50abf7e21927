-- Release the lock if it is still ours and wake waiters.
-- KEYS[1] lock
-- ARGV[1] owner id .. ':', ARGV[2] release memory ms, ARGV[3] release channel
-- Returns 1 released, 2 released earlier by this owner (a retry), 0 not held.
--
-- Instead of deleting the key, leave "~<id>:" in it for ARGV[2] ms: acquire
-- treats it as free, and a retry of this release (its reply lost) finds it
-- and answers "released" instead of "not held". One SET does both jobs.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], '~' .. ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], '')
  return 1
end
if v == '~' .. ARGV[1] then
  return 2
end
return 0

-- Release the lock if it is still ours, remember that we did, wake waiters.
-- KEYS[1] lock, KEYS[2] release marker of this acquisition
-- ARGV[1] owner id .. ':', ARGV[2] marker ttl ms, ARGV[3] release channel
-- Returns 1 released, 2 released earlier by this owner (a retry), 0 not held.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3], '')
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 2
end
return 0

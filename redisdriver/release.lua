-- Release the lock if it is still ours and wake waiters.
-- KEYS[1] lock, KEYS[2] fence hash
-- ARGV[1] owner id .. ':', ARGV[2] release channel
-- Returns 1 released, 2 released earlier by this owner (a retry), 0 not held.
--
-- The releasing owner's id is left in the fence hash (field r), so a retry
-- of this release whose first reply was lost answers "released", not "not
-- held". It stays until the lock's next release.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 'r', ARGV[1])
  redis.call('PUBLISH', ARGV[2], '')
  return 1
end
if redis.call('HGET', KEYS[2], 'r') == ARGV[1] then
  return 2
end
return 0

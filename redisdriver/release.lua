-- Release the lock if it is still ours and wake waiters.
-- KEYS[1] lock, KEYS[2] last released lock
-- ARGV[1] owner id .. ':', ARGV[2] release channel, or '' when the caller
-- publishes itself (see release.go)
-- Returns 1 released, 2 released earlier by this owner (a retry), 0 not held.
--
-- RENAME frees the lock and keeps its value, with the lock's remaining
-- TTL, under KEYS[2], in one call: a retry of this release whose first
-- reply was lost finds our id there and answers "released", not "not held".
-- It is remembered until the lock's next release or that TTL runs out.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('RENAME', KEYS[1], KEYS[2])
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], '')
  end
  return 1
end
v = redis.call('GET', KEYS[2])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return 2
end
return 0

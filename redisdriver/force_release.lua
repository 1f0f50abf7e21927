-- Operator's break-glass release: free the lock whoever holds it.
-- KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] release channel
-- Returns {broken holder's lock value, latest token issued}, or false when
-- the lock was free.
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], '')
return {v, redis.call('GET', KEYS[2]) or '0'}

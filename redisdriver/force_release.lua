-- Operator's break-glass release: free the lock whoever holds it.
-- KEYS[1] lock; ARGV[1] release channel
-- Returns the broken holder's lock value, or nil when the lock was free.
local v = redis.call('GET', KEYS[1])
if not v or string.byte(v, 1) == 126 then -- free, or released ('~')
  return false
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], '')
return v

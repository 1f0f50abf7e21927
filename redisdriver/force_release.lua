-- Operator's break-glass release: free the lock whoever holds it.
-- KEYS[1] lock hash; ARGV[1] release channel
-- Returns the broken holder's token, or nil when the lock was free.
local token = redis.call('HGET', KEYS[1], 'token')
if not token then
  return false
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], '')
return token

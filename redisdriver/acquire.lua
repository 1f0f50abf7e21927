-- Take the lock if it is free and issue the next fencing token.
-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] owner description (JSON)
-- Returns {1, token} when acquired, {0, pttl} when busy.
-- The lock is one string "<id>:<token>:<since ms>:<owner JSON>": a single
-- SET with PX, and the ownership check elsewhere is a prefix comparison.
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  return {0, pttl}
end
-- The token is the larger of (last token + 1) and the server clock in
-- microseconds, so it keeps increasing even if a restart lost the counter,
-- as long as the server clock does not go back by more than the restart took.
local t = redis.call('TIME')
local now_us = t[1] * 1000000 + t[2]
local token = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
if now_us > token then
  token = now_us
end
local tok = string.format('%.0f', token)
redis.call('SET', KEYS[2], tok)
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. tok .. ':' .. string.format('%.0f', math.floor(now_us / 1000)) .. ':' .. ARGV[3],
  'PX', ARGV[2])
return {1, token}

-- Take the lock if it is free and issue the next fencing token.
-- KEYS[1] lock, KEYS[2] fencing counter
-- ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] owner description (JSON),
-- ARGV[4] acquisition time in ms by the holder's clock (for operators only)
-- Returns {1, token} when acquired, {0, pttl} when busy.
--
-- A held lock is one string "<id>:<token>:<since ms>:<owner JSON>"; a
-- released one is "~<id>:" until it expires (see release.lua) and counts as
-- free. Every redis.call costs about a microsecond of the server's single
-- thread, so the common path makes three.
local v = redis.call('GET', KEYS[1])
if v and string.byte(v, 1) ~= 126 then -- 126 is '~'
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
if token == 1 then
  -- The counter did not exist: a new lock name, or a restart or eviction
  -- lost it. Seed it from the server clock in microseconds. Every earlier
  -- token was at most its own seed plus one per acquisition, acquisitions
  -- are more than a microsecond apart, so the seed exceeds them all as long
  -- as the server clock has not gone back.
  local t = redis.call('TIME')
  token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', KEYS[2], string.format('%.0f', token))
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%.0f', token) .. ':' .. ARGV[4] .. ':' .. ARGV[3],
  'PX', ARGV[2])
return {1, token}

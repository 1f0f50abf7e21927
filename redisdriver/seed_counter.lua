-- Shared by acquire.lua and seed.lua (prepended by scripts.go).
--
-- A fencing counter below UNSEEDED was created by INCR from nothing: a
-- new lock name, or a restart, failover or eviction lost the old counter.
-- Its value says nothing about the tokens issued before, so restart it from
-- the server clock in microseconds. Every earlier token was at most its own
-- seed plus one per acquisition attempt, attempts are more than a
-- microsecond apart, so the new seed exceeds them all as long as the server
-- clock has not gone back. (Tokens stay below 2^53, exact in Lua numbers,
-- until the year 2255.)
local UNSEEDED = 1099511627776 -- 2^40: far above any unseeded count, far below any seed
local function seed(fence)
  local t = redis.call('TIME')
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', fence, string.format('%.0f', token))
  return token
end

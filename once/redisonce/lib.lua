-- Shared by every script. Tokens travel as decimal strings without
-- leading zeros and are compared as such: Lua numbers are doubles, which
-- would merge neighbouring tokens above 2^53.
local function token_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- A record is a hash: s = state (1 in progress, 2 completed, 3 failed),
-- t = token, h = payload hash, r = result; its PTTL is its expiry.
local function record(key)
  local rec = redis.call('HMGET', key, 's', 't', 'h', 'r')
  if not rec[1] then return nil end
  return {rec[1], rec[2], rec[3], rec[4] or '', redis.call('PTTL', key)}
end

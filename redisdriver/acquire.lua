-- Take the lock if it is free and issue the next fencing token.
-- KEYS[1] lock hash, KEYS[2] fencing counter
-- ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] host, ARGV[4] pid, ARGV[5] meta
-- Returns {1, token} when acquired, {0, pttl} when busy.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('PTTL', KEYS[1])}
end
-- The token is the larger of (last token + 1) and the server's clock in
-- microseconds: it keeps increasing even if the counter is lost with a
-- restart that did not persist it, as long as the server clock does not
-- go back further than the restart took.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if now_us > token then
  token = now_us
end
local tok = string.format('%.0f', token)
redis.call('SET', KEYS[2], tok)
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'token', tok, 'host', ARGV[3], 'pid', ARGV[4],
  'meta', ARGV[5], 'since', string.format('%.0f', math.floor(now_us / 1000)))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}

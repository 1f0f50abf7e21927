-- Operator's break-glass release: free the lock whoever holds it and wake
-- waiters.
-- KEYS[1] lock, KEYS[2] last released lock
-- Returns the broken holder's token (digits), or false when the lock was free.
local v = redis.call('GET', KEYS[1])
if not v then
  return false
end
local tok = token_of(v, KEYS[1])
-- Keep the token on record like a release does (acquire.lua relies on it),
-- but without the holder's id: the holder's own release must answer
-- NOT_HELD, not ALREADY_RELEASED. An empty id is one no owner has.
keep_release(KEYS[1], KEYS[2], redis.call('GET', KEYS[2]))
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('SET', KEYS[2], string.sub(v, (string.find(v, SEP, 1, true))), 'KEEPTTL')
if redis.call('EXISTS', KEYS[1] .. ':q') == 1 then
  local Q = queue_lib()
  local now, t = q_now_ms()
  Q.settle(Q.keys(KEYS[1]), now, t)
end
redis.call('PUBLISH', KEYS[1] .. CHANNEL_SUFFIX, '')
return tok

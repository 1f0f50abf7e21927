-- One queued request: grant it, queue it (ARGV[5] = '1'), or refuse it.
-- KEYS[1] lock, KEYS[2] its last released lock, KEYS[3] its queue marker
-- (the other queue keys derive from the lock's, see queue_lib.lua)
-- ARGV[1] id prefix ("<id>" SEP), ARGV[2] ttl ms, ARGV[3] mode, ARGV[4]
-- limit, ARGV[5] wait, ARGV[6] inbox, ARGV[7] the rest of a value (SEP
-- "<since>" SEP "<owner>")
-- Returns the token (a string of digits) when granted; "Q<retry ms>" when
-- queued; the retry ms (an integer) when refused. Retry is TTL_UNKNOWN when
-- unknown or not at the head. The common cases reply as acquire.lua does,
-- without building a string.
local idp = ARGV[1]
-- One MGET, as in acquire.lua, so that the common cases cost what a plain
-- acquisition does: a free name without a queue, and a busy one.
local v, last, queued = unpack(redis.call('MGET', KEYS[1], KEYS[2], KEYS[3]))

-- Already ours: a retry after a lost reply, or a waiter that learns of its
-- grant. Same token, and the lease extended as by a renewal.
if owns(v, idp) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return (token_of(v, KEYS[1]))
end
if not queued then
  if not v and ARGV[3] == '1' then -- exclusive (queue_lib's MODE_EXCL)
    local tok = next_token(redis.call('TIME'), last, KEYS[2])
    redis.call('SET', KEYS[1], idp .. tok .. ARGV[7], 'PX', ARGV[2])
    return tok
  end
  if v and ARGV[5] ~= '1' then
    return redis.call('PTTL', KEYS[1])
  end
end

local id, ttl, mode, limit = string.sub(idp, 1, -2), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local H = queue_hot()
local q_join, q_extend, q_grant_exclusive, MODE_EXCL = H.join, H.extend, H.grant_exclusive, H.EXCL
local K = H.keys(KEYS[1])
local now, t = H.now_ms()
local rec_new = 'W' .. mode .. SEP .. limit .. SEP .. ARGV[6] .. ARGV[7]
if queued and v then
  -- Held exclusively by another: nothing is grantable before that holder
  -- leaves, so the queue needs no settling (its expired entries go at the
  -- next call that grants), and a new waiter just joins. The head waits
  -- for that holder's expiry.
  if ARGV[5] ~= '1' then
    return redis.call('PTTL', K.lock)
  end
  local rec, x = unpack(redis.call('HMGET', K.d, id, '#x'))
  if not rec then
    if q_join(K, id, rec_new, now, ttl, x) then
      return 'Q' .. redis.call('PTTL', K.lock)
    end
    return 'Q__TTL_UNKNOWN__'
  end
end

local Q = queue_lib(H)
local q_settle, q_fits, q_hold, epoch_token, q_retry_after = Q.settle, Q.fits, Q.hold, Q.epoch_token, Q.retry_after
if queued then
  q_settle(K, now, t)
  -- Settling may just have granted this very waiter the exclusive lock.
  v = redis.call('GET', K.lock)
  if owns(v, idp) then
    redis.call('PEXPIRE', K.lock, ttl)
    return (token_of(v, K.lock))
  end
end
local exp = now + ttl
local rec = redis.call('HGET', K.d, id)
if rec then
  redis.call('ZADD', K.e, exp, id)
  q_extend(K, exp, ttl)
  if string.sub(rec, 1, 1) == 'H' then
    local a = string.find(rec, SEP, 1, true)
    local b = string.find(rec, SEP, a + 1, true)
    return string.sub(rec, a + 1, b - 1)
  end
  if redis.call('ZRANK', K.w, id) == 0 then
    return 'Q' .. q_retry_after(K, now)
  end
  return 'Q__TTL_UNKNOWN__'
end

if redis.call('ZCARD', K.w) == 0 and q_fits(K, mode, limit) then
  if mode == MODE_EXCL then
    return q_grant_exclusive(K, id, ARGV[7], exp, t, last)
  end
  local tok = epoch_token(K.last, t)
  q_hold(K, id, mode, tok, ARGV[7], exp)
  q_extend(K, exp, ttl)
  return tok
end
if ARGV[5] ~= '1' then
  return q_retry_after(K, now)
end
if q_join(K, id, rec_new, now, ttl) then
  return 'Q' .. q_retry_after(K, now)
end
return 'Q__TTL_UNKNOWN__'

-- One queued request: grant it, queue it (wait '1'), or refuse it.
-- KEYS[1] lock (its last released lock and its queue keys derive from its
-- name, see queue_lib.lua: each argument costs Redis time)
-- ARGV[1] id prefix ("<id>" SEP), ARGV[2] ttl ms, ARGV[3] the rest of a
-- value (SEP "<since>" SEP "<owner>"), ARGV[4] "<mode><wait><max>" SEP
-- "<limit>" SEP "<inbox>", max the most waiters the request joins (digits,
-- or nothing for no cap): one argument, as acquire.lua has, because each
-- argument costs Redis about 0.7 µs per call.
-- Returns the token (a string of digits) when granted; QUEUED - <retry ms>
-- (an integer, at most QUEUED + 2) when queued; the retry ms (an integer,
-- at least -2, PTTL's answer for no key) when refused. Integers, because
-- Lua formats a number into a string at about the cost of a command. The
-- error replies "DLOCK_FULL" (the queue has max waiters already) and
-- "DLOCK_LIMIT <the name's limit>" (a permit request with another limit
-- than the name's, see q_limit) refuse a request that must not wait.
-- Retry is the time until the first blocking holder expires, TTL_UNKNOWN
-- when there is none (only waiters ahead, whose grants are announced). Every waiter gets it, not
-- only the head: one behind others becomes the head by grants and
-- departures it does not hear of, and its poke at that expiry is what
-- grants the name promptly if the holder died (Redis has no expiry hook).
-- The common cases reply as acquire.lua does, without building a string.
local QUEUED = __QUEUED__
local idp, rest, req = ARGV[1], ARGV[3], ARGV[4]
local wait = string.byte(req, 2) == 49 -- '1'
local lock = KEYS[1]
local lastkey = lock .. ':last'
-- One MGET, as in acquire.lua, so that the common cases cost what a plain
-- acquisition does: a free name without a queue, and a busy one.
local v, last, queued = unpack(redis.call('MGET', lock, lastkey, lock .. ':q'))

-- Already ours: a retry after a lost reply, or a waiter that learns of its
-- grant. Same token, and the lease extended as by a renewal.
if owns(v, idp) then
  redis.call('PEXPIRE', lock, ARGV[2])
  return (token_of(v, lock))
end
if not queued then
  if not v and string.byte(req, 1) == 49 then -- exclusive (MODE_EXCL)
    local tok = next_token(redis.call('TIME'), last, lastkey)
    redis.call('SET', lock, idp .. tok .. rest, 'PX', ARGV[2])
    return tok
  end
  if v and not wait then
    return redis.call('PTTL', lock)
  end
end

local id, ttl, mode = string.sub(idp, 1, -2), tonumber(ARGV[2]), string.sub(req, 1, 1)
local now, t = q_now_ms()
local exp = now + ttl
local s = string.find(req, SEP, 3, true)
-- W<mode>:<expiry>:<limit>:<inbox>:<since>:<owner>
local rec_new = 'W' .. mode .. SEP .. exp .. string.sub(req, s) .. rest
if queued and v and mode ~= MODE_PERMIT then
  -- Held exclusively by another: nothing is grantable before that holder
  -- leaves, so the queue needs no settling (its expired entries go at the
  -- next call that grants), and a new waiter just joins. It waits for that
  -- holder's expiry. (A permit request checks the name's limit first,
  -- below; a full queue is settled first, below, as it may be full of
  -- expired places.)
  if not wait then
    return redis.call('PTTL', lock)
  end
  if queue_core().join(lock, id, rec_new, exp, ttl, queued, string.sub(req, 3, s - 1)) then
    return QUEUED - redis.call('PTTL', lock)
  end
end

local Q = queue_lib()
local K = Q.keys(lock)
local x = queued -- the queue keys' expiry; nil once settling may have changed it
if queued then
  Q.settle(K, now, t)
  x = nil
  -- Settling may just have granted this very waiter the exclusive lock.
  v = redis.call('GET', lock)
  if owns(v, idp) then
    redis.call('PEXPIRE', lock, ttl)
    return (token_of(v, lock))
  end
end
local rec, kept = Q.live(K, id, redis.call('HGET', K.d, id), now)
if rec then
  -- A retry, or a waiter's poke: its place or its grant is extended.
  Q.core.extend(lock, exp, ttl, x)
  if string.sub(rec, 1, 1) == 'H' then
    redis.call('ZADD', K.e, exp, id)
    local a = string.find(rec, SEP, 1, true)
    local b = string.find(rec, SEP, a + 1, true)
    return string.sub(rec, a + 1, b - 1)
  end
  redis.call('HSET', K.d, id, Q.moved(rec, exp))
  return QUEUED - Q.retry_after(K, now)
end
if kept and wait then
  -- Its place expired where q_live cannot take it out in bounded time,
  -- deep in a long queue: its entry is still there, and the waiter, back,
  -- has it again rather than a second one (no waiter behind it moved up
  -- meanwhile: an expired place is dropped only at an end).
  Q.core.extend(lock, exp, ttl, x)
  redis.call('HSET', K.d, id, rec_new)
  return QUEUED - Q.retry_after(K, now)
end

local a = string.find(req, SEP, s + 1, true)
local limit = string.sub(req, s + 1, a - 1)
if mode == MODE_PERMIT then
  local theirs = Q.limit(K, limit)
  if theirs then
    return redis.error_reply('DLOCK_LIMIT ' .. theirs)
  end
end
if redis.call('EXISTS', K.w) == 0 and Q.fits(K, mode, limit) then
  if mode == MODE_EXCL then
    local tok = next_token(t, last, lastkey) -- (settling never writes :last)
    redis.call('SET', lock, idp .. tok .. rest, 'PXAT', exp)
    return tok
  end
  local tok = Q.epoch_token(lastkey, t)
  Q.hold(K, id, mode, tok, rest, exp, ttl, x, limit)
  return tok
end
if not wait then
  return Q.retry_after(K, now)
end
if Q.core.join(lock, id, rec_new, exp, ttl, x, string.sub(req, 3, s - 1)) == nil then
  return redis.error_reply('DLOCK_FULL')
end
if mode == MODE_PERMIT then
  redis.call('HSET', K.d, '#l', limit)
  redis.call('HINCRBY', K.d, '#pw', 1)
end
return QUEUED - Q.retry_after(K, now)

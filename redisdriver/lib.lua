-- Prepended to every script (see script.go), and the top of the function
-- library the scripts make (library.go). Upper-case names in double
-- underscores are replaced, before a script is first loaded, by the Go
-- constants of the same meaning (luaConstants), so the two sides cannot
-- drift apart.
--
-- A lock value is "<id>" SEP "<token>" SEP "<since ms>" SEP "<owner JSON>".
-- IDs never contain SEP (the driver refuses them), so "<id>" SEP is an
-- unambiguous prefix and the token is the second field.
local SEP = '__SEP__'
local MAX_TOKEN = '__MAX_TOKEN__' -- 2^53, in digits
local CHANNEL_SUFFIX = '__CHANNEL_SUFFIX__'
local WAITING_SUFFIX = '__WAITING_SUFFIX__'

-- note_waiting marks lock as waited for by a plain Lock (one that waits
-- for the release channel): a release publishes only a name so marked,
-- which spares the PUBLISH of every release nobody waits for. The mark
-- lives the holder's PTTL plus the waiter's ttl_ms, so it outlasts the
-- waiter's fallback timer, which fires at the holder's expiry and asks
-- again (refreshing it), and then expires by itself. A server out of
-- memory refuses the mark; the waiter is still told the lock is busy, and
-- its timer stands in for the notification.
local function note_waiting(lock, pttl, ttl_ms)
  redis.pcall('SET', lock .. WAITING_SUFFIX, '1', 'PX', math.max(pttl, 0) + ttl_ms)
  return pttl
end

-- owns reports whether lock value v (false for a missing key) belongs to
-- the owner whose id prefix ("<id>" SEP) is idp. Every ownership check of
-- every script is this one.
local function owns(v, idp)
  return v ~= false and string.sub(v, 1, #idp) == idp
end

-- owned reads key and reports whether it holds a lock value of the owner
-- with id prefix idp.
local function owned(key, idp)
  return owns(redis.call('GET', key), idp)
end

-- A release RENAMEs the lock to "<lock>:last", which keeps its value, and
-- with it the releaser's id, for the TTL the lock had left: a retry of the
-- release after a lost reply finds its id there. A later release of the
-- same name takes :last over; keep_release first moves the record there
-- (prev, the value at last; false if none) to a key of the releaser's own,
-- "<lock>:r:<id>" SEP, with the TTL it had (RENAME keeps it), so that the
-- retry is still recognised (released_by) after the lock moved on. It does
-- not when the later release names that earlier one settled (its owner
-- had the answer, so no retry can come: driver.ReleaseRequest.Settled),
-- which spares a Client that locks one name again and again a RENAME and
-- a key per cycle.
local function release_key(lock, idp)
  return lock .. ':r:' .. idp
end

local function keep_release(lock, last, prev)
  if not prev then
    return
  end
  local a = string.find(prev, SEP, 1, true)
  if a and a > 1 then -- a force release's record has no id: nothing to keep
    redis.call('RENAME', last, release_key(lock, string.sub(prev, 1, a)))
  end
end

-- released_by reports whether the owner with id prefix idp released lock,
-- whose :last holds last_v (false for none).
local function released_by(lock, last_v, idp)
  return owns(last_v, idp) or redis.call('EXISTS', release_key(lock, idp)) == 1
end

-- token_digits returns the fencing token in lock value v, read from key
-- (named in the error), as its digits. Tokens are microsecond counts,
-- exact in a Lua number (a double) below MAX_TOKEN = 2^53, which the clock
-- reaches in the year 2255; anything else (no digits, a leading zero, 2^53
-- or more) is not a value this driver wrote, and acquiring past it could
-- break the order of tokens, so it is an error rather than a guess. The
-- checks compare strings: digits without a leading zero order as their
-- numbers when as long, and converting 16 digits to a number is one of the
-- dearest things a script does.
local function token_digits(v, key)
  local a = string.find(v, SEP, 1, true)
  local b = a and string.find(v, SEP, a + 1, true)
  local s = b and string.sub(v, a + 1, b - 1)
  if not s or #s > #MAX_TOKEN or not string.find(s, '^[1-9]%d*$') or (#s == #MAX_TOKEN and s >= MAX_TOKEN) then
    error('dlock: malformed lock value in ' .. key)
  end
  return s
end

-- token_of returns the fencing token in lock value v, read from key, as
-- its digits and as a number (see token_digits).
local function token_of(v, key)
  local s = token_digits(v, key)
  return s, tonumber(s)
end

-- next_token issues the next exclusive fencing token of a name, from the
-- server time t (redis.call('TIME')) and last, the value of its last
-- released lock (false if none), read from lastkey. The token is a hybrid
-- logical clock:
--   token = max(token recorded in last + 1, server TIME in microseconds)
-- Why it exceeds every token issued before for this name:
--  * Every token is at least the server time at its issue, and exceeds it
--    by at most a few microseconds (the +1 of a record issued within the
--    last few microseconds; every script call takes longer than that).
--  * A record of every token lives until the lock's expiry time, which is
--    at least a millisecond (a TTL, or a renewal's) after its issue: the
--    lock key itself, then, after a release, the last key, which RENAME
--    gives the lock's remaining TTL. A later release overwrites the last
--    key with a greater token, which serves as well; so does the next
--    holder's lock key after a hand-off to a fair waiter (q_handoff), which
--    keeps the released value under a key of its own instead.
--  * So a new token is greater either through the record, or because the
--    record is gone, so the server clock has passed that expiry time.
--  * After a restart from any older state (an RDB snapshot, an AOF synced
--    every second, a replica that lagged), restored records are merely
--    old, and TIME has moved past every token issued before the crash.
-- Assumed: the server clock never goes back, and across a failover the new
-- master's clock is not behind the old one's by more than the time between
-- the last acquisition on the old master and the first on the new one.
-- No counter is kept, so nothing outlives the locks it describes.
-- It also returns the 6 digits of microseconds of t.
local function next_token(t, last, lastkey)
  local us = string.sub('00000' .. t[2], -6)
  local tok = t[1] .. us -- seconds and 6 digits of microseconds
  if last then
    local prev = token_digits(last, lastkey)
    if #prev > #tok or (#prev == #tok and prev >= tok) then -- (see token_digits)
      tok = string.format('%.0f', tonumber(prev) + 1) -- %.0f: tostring would use exponent form
    end
  end
  return tok, us
end

-- Take the lock if it is free and issue the next fencing token.
-- KEYS[1] lock, KEYS[2] the last released lock of the same name
-- ARGV[1] id prefix ("<id>" SEP), ARGV[2] ttl ms,
-- ARGV[3] the rest of the value (SEP "<since ms>" SEP "<owner JSON>"),
-- ARGV[4] '1' when the caller will wait and needs the holder's PTTL
-- Returns the token, as a string of digits, when acquired; the holder's
-- PTTL, an integer, when busy (TTL_UNKNOWN when not asked for). One scalar
-- reply, and no number formatted in the common case: a table reply and
-- string.format('%.0f') each cost Redis about as much as a command.
-- Every redis.call costs the server about a microsecond on top of the
-- command, so both keys are read with one MGET (they share a slot).
local v, last = unpack(redis.call('MGET', KEYS[1], KEYS[2]))
if owns(v, ARGV[1]) then
  -- Our own lock: an earlier try of this same request took it and its
  -- reply was lost (go-redis resends such a command). Same token.
  local tok = token_of(v, KEYS[1])
  return tok
end
if v then
  if ARGV[4] ~= '1' then
    return __TTL_UNKNOWN__
  end
  return redis.call('PTTL', KEYS[1])
end

-- The token is a hybrid logical clock:
--   token = max(token recorded in KEYS[2] + 1, server TIME in microseconds)
-- Why it exceeds every token issued before for this name:
--  * Every token is at least the server time at its issue, and exceeds it
--    by at most a few microseconds (the +1 of a record issued within the
--    last few microseconds; every script call takes longer than that).
--  * A record of every token lives until the lock's expiry time, which is
--    at least a millisecond (a TTL, or a renewal's) after its issue: the
--    lock key itself, then, after a release, KEYS[2], which RENAME gives
--    the lock's remaining TTL. A later release overwrites KEYS[2] with a
--    greater token, which serves as well.
--  * So a new token is greater either through the record, or because the
--    record is gone, so the server clock has passed that expiry time.
--  * After a restart from any older state (an RDB snapshot, an AOF synced
--    every second, a replica that lagged), restored records are merely
--    old, and TIME has moved past every token issued before the crash.
-- Assumed: the server clock never goes back, and across a failover the new
-- master's clock is not behind the old one's by more than the time between
-- the last acquisition on the old master and the first on the new one.
-- No counter is kept, so nothing outlives the locks it describes.
local t = redis.call('TIME')
local tok = t[1] .. string.sub('00000' .. t[2], -6) -- seconds and 6 digits of microseconds
if last then
  local _, prev = token_of(last, KEYS[2])
  if prev >= tonumber(tok) then
    tok = string.format('%.0f', prev + 1) -- %.0f: tostring would use exponent form
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. tok .. ARGV[3], 'PX', ARGV[2])
return tok

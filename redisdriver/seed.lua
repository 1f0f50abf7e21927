-- Called by a holder whose transaction found the fencing counter unseeded
-- (a restart, failover or eviction lost it). Seed it, if the lock is still
-- the caller's.
-- KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] owner id .. ':'
-- Returns the holder's token, or false when the lock is no longer ours.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return false
end
local token = tonumber(redis.call('GET', KEYS[2]) or '0')
if token < UNSEEDED then
  return seed(KEYS[2])
end
-- Only the holder seeds and we hold the lock, so this is not expected; a
-- seeded counter just moves on.
return redis.call('INCR', KEYS[2])

-- Raise the fencing token of a held lock to a quorum's token (quorum.go):
-- the lease's token is the highest its majority issued, and every master
-- of the majority must keep it on record, so that a later majority, which
-- shares a master with this one, issues a greater one (docs/quorum.md).
-- KEYS[1] lock; ARGV[1] owner id prefix ("<id>" SEP), ARGV[2] the token,
-- as digits without a leading zero below MAX_TOKEN (checked by the driver)
-- Returns 1 when the lock is the owner's and its token is now at least
-- ARGV[2] (the expiry unchanged), 0 when it is not the owner's.
local v = redis.call('GET', KEYS[1])
if not owns(v, ARGV[1]) then
  return 0
end
local cur, want = token_digits(v, KEYS[1]), ARGV[2]
if #cur > #want or (#cur == #want and cur >= want) then -- (see token_digits)
  return 1
end
local a = #ARGV[1]
local b = string.find(v, SEP, a + 1, true)
local pttl = redis.call('PTTL', KEYS[1])
if pttl <= 0 then -- expiring this very millisecond: as good as gone
  return 0
end
redis.call('SET', KEYS[1], string.sub(v, 1, a) .. want .. string.sub(v, b), 'PX', pttl)
return 1

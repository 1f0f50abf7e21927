-- KEYS[1] record; ARGV token, final state (2 completed, 3 failed), result,
-- ttl ms. Applies only to a record in progress under exactly this token;
-- the same call repeated (a retry after a lost reply) is answered 1 again.
-- Returns 1 when applied, 0 when the claim was lost.
local rec = redis.call('HMGET', KEYS[1], 's', 't')
if not rec[1] or rec[2] ~= ARGV[1] then return 0 end
if rec[1] == ARGV[2] then return 1 end
if rec[1] ~= '1' then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'r', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1

-- Read a lock's holder and remaining time in one atomic step.
-- KEYS[1] lock hash. Returns {pttl, field, value, ...}; pttl < 0 when free.
local fields = redis.call('HGETALL', KEYS[1])
table.insert(fields, 1, redis.call('PTTL', KEYS[1]))
return fields

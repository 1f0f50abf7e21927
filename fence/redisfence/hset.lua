-- KEYS[2] data key; ARGV[2..] field, value, field, value...
local n = redis.call('HSET', KEYS[2], unpack(ARGV, 2))
advance()
return {1, n}

-- KEYS[2] data key; ARGV[2] increment.
local n = redis.call('INCRBY', KEYS[2], ARGV[2])
advance()
return {1, n}

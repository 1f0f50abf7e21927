-- KEYS[2] data key. Deletes the data and keeps the mark, so a stale holder
-- cannot bring the data back.
local n = redis.call('DEL', KEYS[2])
advance()
return {1, n}

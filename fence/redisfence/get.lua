-- KEYS[2] data key. A fenced read registers the token like a write, so an
-- older holder cannot write after this reader read.
local v = redis.call('GET', KEYS[2])
advance()
if v then
  return {1, v}
end
return {1}

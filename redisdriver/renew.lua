-- Extend every listed lock that is still held by the given owner.
-- KEYS[i] lock; ARGV[2i-1] owner id prefix, ARGV[2i] ttl ms
-- Returns a string of one digit per key: EXTENDED, or LOST when the lock
-- is not ours any more (a string: Redis converts a table reply slowly).
local held = {}
for i = 1, #KEYS do
  if owned(KEYS[i], ARGV[2 * i - 1]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    held[i] = '__EXTENDED__'
  else
    held[i] = '__LOST__'
  end
end
return table.concat(held)

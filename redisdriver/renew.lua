-- Extend every listed lock that is still held by the given owner.
-- KEYS[i] lock; ARGV[2i-1] owner id prefix, ARGV[2i] ttl ms
-- Returns a string of one digit per key: 1 extended, 0 not ours any more
-- (a string because Redis converts a table reply slowly).
local held = {}
for i = 1, #KEYS do
  if owned(KEYS[i], ARGV[2 * i - 1]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    held[i] = '1'
  else
    held[i] = '0'
  end
end
return table.concat(held)

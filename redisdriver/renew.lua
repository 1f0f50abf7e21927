-- Extend every listed lock that is still held by the given owner.
-- KEYS[i] lock; ARGV[2i-1] owner id prefix, ARGV[2i] ttl ms
-- Returns one 1 (extended) or 0 (not ours any more) per key.
local held = {}
for i = 1, #KEYS do
  if owned(KEYS[i], ARGV[2 * i - 1]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
    held[i] = 1
  else
    held[i] = 0
  end
end
return held

-- KEYS[2] data key; ARGV[2] value, ARGV[3] expiry in ms (0: none).
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[2], ARGV[2])
end
advance()
return {1}

-- KEYS[1] record; ARGV token, payload hash, ttl ms.
-- Claims when there is no record, or the record has the same hash, is not
-- completed and has a token not above ours. Returns {claimed, record}.
local rec = record(KEYS[1])
if rec and (rec[3] ~= ARGV[2] or rec[1] == '2' or token_less(ARGV[1], rec[2])) then
  return {0, rec}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', '1', 't', ARGV[1], 'h', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, record(KEYS[1])}

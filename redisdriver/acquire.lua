-- Take the lock if it is free and issue the next fencing token.
-- KEYS[1] lock, KEYS[2] the last released lock of the same name,
-- KEYS[3] its queue marker (queue_lib.lua)
-- ARGV[1] id prefix ("<id>" SEP), ARGV[2] ttl ms,
-- ARGV[3] the rest of the value (SEP "<since ms>" SEP "<owner JSON>"),
-- ARGV[4] '1' when the caller will wait and needs the holder's PTTL (it
-- waits for the release channel: note_waiting in lib.lua)
-- ARGV[5], optional: a floor for the token, as digits without a leading
-- zero below MAX_TOKEN (checked by the driver): a quorum's proposal, so
-- that its masters issue the same token (quorum.go); "0" for none
-- ARGV[6], optional: '1' when the caller sends WAIT after the call
-- (WithReplicaAck): a retry that finds its own lock writes it again
-- Returns the token, as a string of digits, when acquired; the holder's
-- PTTL, an integer, when busy (TTL_UNKNOWN when not asked for). One scalar
-- reply, and no number formatted in the common case: a table reply and
-- string.format('%.0f') each cost Redis about as much as a command.
-- Every redis.call costs the server about a microsecond on top of the
-- command, so the keys are read with one MGET (they share a slot).
local v, last, queued = unpack(redis.call('MGET', KEYS[1], KEYS[2], KEYS[3]))
if owns(v, ARGV[1]) then
  -- Our own lock: an earlier try of this same request took it and its
  -- reply was lost (go-redis resends such a command). Same token. With
  -- ARGV[6] (WithReplicaAck) the value is written again, with the TTL from
  -- this try: go-redis may send the try again on another connection, and
  -- the WAIT after it counts the writes of that connection only, so
  -- without a write here it would confirm a lock the replicas never
  -- received. Without it nothing is written, so that the answer needs no
  -- memory (a retry under maxmemory still learns it holds the lock).
  local tok = token_of(v, KEYS[1])
  if ARGV[6] == '1' then
    redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
  end
  return tok
end
if v then
  if ARGV[4] ~= '1' then
    return __TTL_UNKNOWN__
  end
  return note_waiting(KEYS[1], redis.call('PTTL', KEYS[1]), ARGV[2])
end

-- A name with queued leases (fair waiters, readers, permits) is not free:
-- taking it would jump the queue. q_settle first grants what expiries
-- made grantable, which may be the lock itself.
if queued then
  local Q = queue_lib()
  local K = Q.keys(KEYS[1])
  local now, t = q_now_ms()
  if Q.settle(K, now, t) or redis.call('EXISTS', KEYS[1]) == 1 then
    if ARGV[4] ~= '1' then
      return __TTL_UNKNOWN__
    end
    return note_waiting(KEYS[1], Q.retry_after(K, now), ARGV[2])
  end
end

-- See next_token (lib.lua) for why the token exceeds every earlier one.
local tok = next_token(redis.call('TIME'), last, KEYS[2])
local floor = ARGV[5]
if floor and (#floor > #tok or (#floor == #tok and floor > tok)) then -- (see token_digits)
  tok = floor
end
redis.call('SET', KEYS[1], ARGV[1] .. tok .. ARGV[3], 'PX', ARGV[2])
return tok

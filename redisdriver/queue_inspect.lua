-- A name's holders and waiters, for operators, as of now (expired leases
-- are dropped and what they blocked is granted first, as any call would).
-- KEYS[1] lock
-- Returns { lock value or false, its PTTL, now ms, waiter ids in order,
-- { member, expiry ms, ... } of P{N}:e, { field, value, ... } of P{N}:d }.
local Q = queue_lib()
local K = Q.keys(KEYS[1])
local now, t = q_now_ms()
Q.settle(K, now, t)
return {
  redis.call('GET', K.lock),
  redis.call('PTTL', K.lock),
  now,
  redis.call('LRANGE', K.w, 0, -1),
  redis.call('ZRANGE', K.e, 0, -1, 'WITHSCORES'),
  redis.call('HGETALL', K.d),
}

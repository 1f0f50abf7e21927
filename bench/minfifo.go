package main

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// The min-fifo peer is raw-fifo plus the least the fair lock's promises
// make the store do, to tell what those promises cost from what dlock's
// implementation of them costs:
//   - a waiter's place expires by the store's clock (a dead waiter drops
//     out), so each join records an expiry and each hand-off checks the
//     head's and skips an expired one;
//   - a grant keeps its place's expiry, and carries a fencing token;
//   - the release is ownership-checked.
// It keeps no record of a waiter's owner or arrival time, no release
// records for retries, no key expiry, no readers or permits, and its
// fencing counter is a key that is never deleted. Like raw-fifo it is not
// a usable lock, and it runs only when named in -peers.

// minFIFOLock takes the lock if it is free and nobody waits, else queues
// the id with an expiry. KEYS[1] lock, KEYS[2] queue, KEYS[3] expiries,
// KEYS[4] fencing counter; ARGV[1] id, ARGV[2] ttl ms. Returns the token,
// or 0 when queued.
var minFIFOLock = redis.NewScript(`
if redis.call('LLEN', KEYS[2]) == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  local tok = redis.call('INCR', KEYS[4])
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. tok, 'PX', ARGV[2])
  return tok
end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[2], ARGV[1])
return 0`)

// minFIFOUnlock releases the lock if ARGV[1] holds it and hands it, with
// the next token and its place's expiry, to the first live waiter,
// published on ARGV[3] .. "<worker>" as "<id>:<token>" (ARGV[2], the TTL,
// is not needed: the grant keeps the place's expiry).
var minFIFOUnlock = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
while true do
  local head = redis.call('LPOP', KEYS[2])
  if not head then
    redis.call('DEL', KEYS[1])
    return 1
  end
  local exp = tonumber(redis.call('ZSCORE', KEYS[3], head))
  redis.call('ZREM', KEYS[3], head)
  if exp and exp > now then
    local tok = redis.call('INCR', KEYS[4])
    redis.call('SET', KEYS[1], head .. ':' .. tok, 'PXAT', exp)
    redis.call('PUBLISH', ARGV[3] .. string.match(head, '^[^:]+'), head .. ':' .. tok)
    return 1
  end
end`)

func newMinFIFOWorker(e env) (worker, error) {
	return newScriptFIFOWorker(e, scriptFIFO{
		name: "min-fifo", inbox: "bench:min-fifo:inbox:", lock: minFIFOLock, unlock: minFIFOUnlock,
		keys: func(key string) []string { return []string{key, key + ":q", key + ":e", key + ":fence"} },
		mine: func(payload, id string) bool { return strings.HasPrefix(payload, id+":") },
	})
}

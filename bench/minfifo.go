package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

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
// published on ARGV[2] .. "<worker>" as "<id>:<token>".
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
    redis.call('PUBLISH', ARGV[2] .. string.match(head, '^[^:]+'), head .. ':' .. tok)
    return 1
  end
end`)

type minFIFOWorker struct {
	rdb   *redis.Client
	ps    *redis.PubSub
	e     env
	token string
	n     atomic.Int64 // acquisitions, for a fresh id per acquisition
}

const minFIFOInbox = "bench:min-fifo:inbox:"

func newMinFIFOWorker(e env) (worker, error) {
	w := &minFIFOWorker{rdb: newRedisClient(e.redisAddr), e: e, token: randomToken()}
	w.ps = w.rdb.Subscribe(context.Background(), minFIFOInbox+w.token)
	if _, err := w.ps.Receive(context.Background()); err != nil { // the subscription's confirmation
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *minFIFOWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	id := fmt.Sprintf("%s:%d", w.token, w.n.Add(1))
	keys := []string{key, key + ":q", key + ":e", key + ":fence"}
	ms := w.e.ttl.Milliseconds()
	got, err := minFIFOLock.Run(ctx, w.rdb, keys, id, ms).Int64()
	if err != nil {
		return nil, err
	}
	if got == 0 {
		for {
			m, err := w.ps.ReceiveMessage(ctx)
			if err != nil {
				if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
					<-ctx.Done() // the read timed out at the round's end, which ctx reports in a moment
					return nil, ctx.Err()
				}
				return nil, err
			}
			if strings.HasPrefix(m.Payload, id+":") { // else a grant of an abandoned wait
				break
			}
		}
	}
	return func(ctx context.Context) error {
		n, err := minFIFOUnlock.Run(ctx, w.rdb, keys, id, minFIFOInbox).Int()
		if err == nil && n != 1 {
			err = errors.New("min-fifo: lock not held at release")
		}
		return err
	}, nil
}

func (w *minFIFOWorker) close() {
	if w.ps != nil {
		_ = w.ps.Close()
	}
	_ = w.rdb.Close()
}

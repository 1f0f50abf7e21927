package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The raw-fifo peer is the least a FIFO lock with direct hand-off can cost
// over Redis with go-redis: a list of waiting tokens, a release script that
// pops the head, makes it the holder and publishes to that worker's own
// channel, and a worker that reads its pub/sub connection itself, with no
// goroutine in between. It keeps no waiter expiry, no fencing token and no
// renewal, so it is not a usable lock: it bounds what any FIFO hand-off
// built this way can reach on the machine, for comparison with dlock
// and with the polling peers. Run only when named in -peers.

// rawFIFOLock takes the lock if it is free and nobody waits, else queues
// the token. KEYS[1] lock, KEYS[2] queue; ARGV[1] token, ARGV[2] ttl ms.
var rawFIFOLock = redis.NewScript(`
if redis.call('LLEN', KEYS[2]) == 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0`)

// rawFIFOUnlock releases the lock if ARGV[1] holds it and hands it to the
// head of the queue ("<worker>:<n>"), published on ARGV[3] .. "<worker>".
var rawFIFOUnlock = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local head = redis.call('LPOP', KEYS[2])
if head then
  redis.call('SET', KEYS[1], head, 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[3] .. string.match(head, '^[^:]+'), head)
else
  redis.call('DEL', KEYS[1])
end
return 1`)

// scriptFIFOWorker is a worker of a floor peer: one lock script that takes
// the lock or queues the acquisition's id, one release script that hands
// the lock to the head and publishes to that worker's own channel, and a
// worker that reads its pub/sub connection itself, with no goroutine in
// between.
type scriptFIFOWorker struct {
	rdb   *redis.Client
	ps    *redis.PubSub
	e     env
	token string
	n     atomic.Int64 // acquisitions, for a fresh id per acquisition
	fifo  scriptFIFO
}

// scriptFIFO is what tells one floor peer from another.
type scriptFIFO struct {
	name         string
	inbox        string // channel prefix; the worker's token follows
	lock, unlock *redis.Script
	keys         func(key string) []string
	// mine reports whether a published grant is for acquisition id.
	mine func(payload, id string) bool
}

func newScriptFIFOWorker(e env, f scriptFIFO) (worker, error) {
	w := &scriptFIFOWorker{rdb: newRedisClient(e.redisAddr), e: e, token: randomToken(), fifo: f}
	w.ps = w.rdb.Subscribe(context.Background(), f.inbox+w.token)
	if _, err := w.ps.Receive(context.Background()); err != nil { // the subscription's confirmation
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *scriptFIFOWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	id := fmt.Sprintf("%s:%d", w.token, w.n.Add(1))
	keys := w.fifo.keys(key)
	ms := w.e.ttl.Milliseconds()
	got, err := w.fifo.lock.Run(ctx, w.rdb, keys, id, ms).Int64()
	if err != nil {
		return nil, err
	}
	if got == 0 { // queued
		for {
			m, err := w.ps.ReceiveMessage(ctx)
			if err != nil {
				if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
					<-ctx.Done() // the read timed out at the round's end, which ctx reports in a moment
					return nil, ctx.Err()
				}
				return nil, err
			}
			if w.fifo.mine(m.Payload, id) { // else a grant of an abandoned wait
				break
			}
		}
	}
	return func(ctx context.Context) error {
		n, err := w.fifo.unlock.Run(ctx, w.rdb, keys, id, ms, w.fifo.inbox).Int()
		if err == nil && n != 1 {
			err = errors.New(w.fifo.name + ": lock not held at release")
		}
		return err
	}, nil
}

func (w *scriptFIFOWorker) close() {
	if w.ps != nil {
		_ = w.ps.Close()
	}
	_ = w.rdb.Close()
}

func newRawFIFOWorker(e env) (worker, error) {
	return newScriptFIFOWorker(e, scriptFIFO{
		name: "raw-fifo", inbox: "bench:raw-fifo:inbox:", lock: rawFIFOLock, unlock: rawFIFOUnlock,
		keys: func(key string) []string { return []string{key, key + ":q"} },
		mine: func(payload, id string) bool { return payload == id },
	})
}

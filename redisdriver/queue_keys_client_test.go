package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// No key outlives the leases it describes: after full cycles of every
// queued mode on a fresh server — fair exclusive, shared, permits, with
// waiters that are served, waiters that give up, and holders that die and
// expire — every key left has an expiry, and none a longer one than 1.25
// times the longest lease's TTL (the queue keys' margin, queue_lib.lua).
func TestQueueKeysExpireWithTheirLeases(t *testing.T) {
	const ttl, deadTTL = 2 * time.Second, 400 * time.Millisecond // ttl: the longest lease
	srv := redisserver.Start(t)
	px := redisserver.NewProxy(t, srv.Addr())
	a := newLocker(t, srv.Addr(), dlock.WithDefaultTTL(ttl))
	b := newLocker(t, srv.Addr(), dlock.WithDefaultTTL(ttl))
	dead := newLocker(t, px.Addr(), dlock.WithDefaultTTL(deadTTL))
	// Runs before the dead Client's Close, which then need not time out.
	t.Cleanup(func() { px.Blackhole(false); px.CloseAll() })
	ctx := ctxTimeout(t, 60*time.Second)
	admin := srv.Client(t)
	for _, c := range queueCycles(ctx, a, b, dead, px, deadTTL) {
		if !t.Run(c.name, c.run) {
			return
		}
	}
	checkKeysExpire(t, ctx, admin, ttl)
}

// cycle is a named run of the test above.
type cycle struct {
	name string
	run  func(t *testing.T)
}

// queueCycles are the full cycles of every queued mode, each on names of
// its own, so that no later cycle can repair what an earlier one left: a
// and b take and wait; dead holds leases until px, its only way to the
// server, goes dark, and they expire after deadTTL.
func queueCycles(ctx context.Context, a, b, dead *dlock.Client, px *redisserver.Proxy, deadTTL time.Duration) []cycle {
	return []cycle{
		{"fair", func(t *testing.T) {
			unlock(t, got(t)(a.Lock(ctx, "fair-alone", dlock.WithFIFO())))
			l := got(t)(a.Lock(ctx, "fair", dlock.WithFIFO()))
			ch := acquired(t, func() (*dlock.Lease, error) { return b.Lock(ctx, "fair", dlock.WithFIFO()) })
			waitInQueue(t, a, "fair", 1)
			unlock(t, l)
			unlock(t, receive(t, ch, "fair waiter"))
		}},
		{"shared", func(t *testing.T) {
			unlock(t, got(t)(a.RWMutex("shared-alone").RLock(ctx)))
			r1 := got(t)(a.RWMutex("shared").RLock(ctx))
			r2 := got(t)(b.RWMutex("shared").RLock(ctx))
			unlock(t, r1)
			unlock(t, r2)
		}},
		{"permit", func(t *testing.T) {
			unlock(t, got(t)(a.Semaphore("permit-alone", 2).Acquire(ctx)))
			p1 := got(t)(a.Semaphore("permit", 2).Acquire(ctx))
			p2 := got(t)(b.Semaphore("permit", 2).Acquire(ctx))
			ch := acquired(t, func() (*dlock.Lease, error) { return b.Semaphore("permit", 2).Acquire(ctx) })
			waitInQueue(t, a, "permit", 1)
			unlock(t, p2)
			unlock(t, receive(t, ch, "permit waiter"))
			unlock(t, p1)
		}},
		{"mixed", func(t *testing.T) {
			m := a.RWMutex("mixed")
			r := got(t)(m.RLock(ctx))
			w := acquired(t, func() (*dlock.Lease, error) { return b.RWMutex("mixed").Lock(ctx) })
			waitInQueue(t, a, "mixed", 1)
			// A reader behind the writer gives up; then the writer is served.
			gctx, giveUp := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := b.RWMutex("mixed").RLock(gctx)
				done <- err
			}()
			waitInQueue(t, a, "mixed", 2)
			giveUp()
			if err := <-done; err == nil {
				t.Fatal("a reader that gave up was granted")
			}
			waitInQueue(t, a, "mixed", 1)
			unlock(t, r)
			unlock(t, receive(t, w, "writer"))
		}},
		{"expired", func(t *testing.T) {
			// Holders whose process stops: no renewal, no release.
			d1 := got(t)(dead.RWMutex("expired-rw").RLock(ctx))
			d2 := got(t)(dead.Semaphore("expired-sem", 1).Acquire(ctx))
			d3 := got(t)(dead.Lock(ctx, "expired-fair", dlock.WithFIFO()))
			px.Blackhole(true)
			unlock(t, got(t)(a.RWMutex("expired-rw").Lock(ctx)))
			unlock(t, got(t)(a.Semaphore("expired-sem", 1).Acquire(ctx)))
			unlock(t, got(t)(a.Lock(ctx, "expired-fair", dlock.WithFIFO())))
			for _, l := range []*dlock.Lease{d1, d2, d3} {
				waitDone(t, l, deadTTL)
			}
		}},
	}
}

// checkKeysExpire checks every key left on the server: it has an expiry,
// none later than 1.25 ttl (the longest lease's) away, and they are all
// gone once that has passed.
func checkKeysExpire(t *testing.T, ctx context.Context, admin *redis.Client, ttl time.Duration) {
	t.Helper()
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		pttl, err := admin.PTTL(ctx, k).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case pttl == -1:
			t.Errorf("key %q has no expiry", k)
		case pttl > ttl+ttl/4:
			t.Errorf("key %q expires in %v, more than 1.25 × the longest lease's TTL (%v)", k, pttl, ttl)
		}
	}
	t.Logf("keys left: %v", keys)
	// And they do expire: once the longest lease is over, nothing is left.
	deadline := time.Now().Add(ttl + ttl/4 + time.Second)
	for len(keys) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if keys, err = admin.Keys(ctx, "*").Result(); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) > 0 {
		t.Errorf("keys left 1.25 TTL after the last lease: %v", keys)
	}
}

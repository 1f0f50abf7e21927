package dlock_test

// The mission's three classic failures, each reproduced against a naive
// lock written here (to show the test can see the failure) and then run on
// dlock (to show it does not happen).

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// naiveLock is the hand-rolled lock the mission warns about.
type naiveLock struct{ rdb *redis.Client }

// acquire is SETNX then EXPIRE; crashBetween models the process dying
// between the two commands.
func (n naiveLock) acquire(ctx context.Context, key string, ttl time.Duration, crashBetween bool) bool {
	ok, err := n.rdb.SetNX(ctx, key, "me", 0).Result()
	if err != nil || !ok {
		return false
	}
	if crashBetween {
		return true
	}
	n.rdb.PExpire(ctx, key, ttl)
	return true
}

// release is DEL with no ownership check.
func (n naiveLock) release(ctx context.Context, key string) { n.rdb.Del(ctx, key) }

// Failure 1: SETNX then EXPIRE is not atomic.
func TestClassicCrashBetweenSetnxAndExpire(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	ctx := leasecheck.Context(t, 20*time.Second)
	const ttl = 200 * time.Millisecond

	t.Run("naive lock never expires", func(t *testing.T) {
		n := naiveLock{rdb}
		if !n.acquire(ctx, "naive:crash", ttl, true) {
			t.Fatal("naive acquire failed")
		}
		if pttl := rdb.PTTL(ctx, "naive:crash").Val(); pttl != -1 {
			t.Fatalf("expected the failure (no expiry), got PTTL %v", pttl)
		}
		deadline := time.Now().Add(5 * ttl)
		for time.Now().Before(deadline) {
			if n.acquire(ctx, "naive:crash", ttl, false) {
				t.Fatal("naive lock was re-acquired: the failure did not reproduce")
			}
			time.Sleep(ttl / 4)
		}
	})

	t.Run("dlock lock expires after its holder crashed", func(t *testing.T) {
		// The holder talks through a proxy; the crash is the proxy going
		// silent, so neither renewal nor release reaches Redis.
		proxy := redisserver.NewProxy(t, srv.Addr())
		holder := leasecheck.NewLocker(t, proxy.Addr())
		l, err := holder.TryLock(ctx, "dlock:crash", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if pttl := rdb.PTTL(ctx, leasecheck.LockKey("dlock:crash")).Val(); pttl <= 0 || pttl > ttl {
			t.Fatalf("lock key has PTTL %v right after acquisition, want (0, %v]", pttl, ttl)
		}
		proxy.Blackhole(true)
		other := leasecheck.NewLocker(t, srv.Addr())
		l2, err := other.Lock(leasecheck.Context(t, 20*ttl), "dlock:crash")
		if err != nil {
			t.Fatalf("lock of a crashed holder never freed: %v", err)
		}
		if l2.Token() <= l.Token() {
			t.Fatalf("token %d after crashed holder's %d", l2.Token(), l.Token())
		}
		// The silent holder's lease ends on its own too (that it ends before
		// a rival can get in is TestLostBeforeExpiryWhenRepliesAreDelayed).
		leasecheck.WaitDone(t, l, ttl)
		_ = l2.Unlock(ctx)
	})
}

// Failure 2: DEL on release does not check ownership.
func TestClassicReleaseDeletesForeignLock(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	ctx := leasecheck.Context(t, 20*time.Second)
	const ttl = 100 * time.Millisecond

	t.Run("naive release deletes B's lock", func(t *testing.T) {
		a, b := naiveLock{rdb}, naiveLock{srv.Client(t)}
		a.acquire(ctx, "naive:del", ttl, false)
		waitGone(t, rdb, "naive:del")
		if !b.acquire(ctx, "naive:del", 10*time.Second, false) {
			t.Fatal("B could not acquire")
		}
		a.release(ctx, "naive:del") // A's late release
		if rdb.Exists(ctx, "naive:del").Val() != 0 {
			t.Fatal("B's lock survived: the failure did not reproduce")
		}
	})

	t.Run("dlock release leaves B's lock alone", func(t *testing.T) {
		a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
		la, err := a.TryLock(ctx, "dlock:del", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		leasecheck.WaitDone(t, la, 10*ttl)
		if !errors.Is(la.Err(), dlock.ErrLockLost) {
			t.Fatalf("fixed lease ended with %v, want ErrLockLost", la.Err())
		}
		lb, err := b.Lock(leasecheck.Context(t, 20*ttl), "dlock:del")
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("late Unlock: %v, want ErrNotHeld", err)
		}
		if err := la.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("repeated late Unlock: %v, want the same ErrNotHeld", err)
		}
		if !leasecheck.IsHeld(t, rdb, "dlock:del") || lb.Err() != nil {
			t.Fatal("B's lock was removed by A's late Unlock")
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// waitGone polls until key has expired.
func waitGone(t *testing.T, rdb *redis.Client, key string) {
	t.Helper()
	for i := 0; rdb.Exists(context.Background(), key).Val() != 0; i++ {
		if i > 500 {
			t.Fatalf("%s never expired", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Failure 3: the work outlives the TTL.
func TestClassicWorkOutlivesTTL(t *testing.T) {
	srv := redisserver.Start(t)
	ctx := leasecheck.Context(t, 30*time.Second)
	const ttl = 150 * time.Millisecond
	const work = 5 * ttl

	t.Run("naive lock lets B in during A's work", func(t *testing.T) {
		a, b := naiveLock{srv.Client(t)}, naiveLock{srv.Client(t)}
		var inside atomic.Int32
		a.acquire(ctx, "naive:slow", ttl, false)
		inside.Add(1)
		overlap := false
		deadline := time.Now().Add(work)
		for time.Now().Before(deadline) && !overlap {
			if b.acquire(ctx, "naive:slow", ttl, false) {
				overlap = inside.Load() == 1
			}
			time.Sleep(ttl / 10)
		}
		if !overlap {
			t.Fatal("B never got in while A worked: the failure did not reproduce")
		}
	})

	t.Run("dlock watchdog keeps B out", func(t *testing.T) {
		// A longer TTL than the naive lock's, so that a renewal delayed by
		// a loaded machine (they come every TTL/3) cannot end A's lease;
		// the work still outlives it three times.
		const ttl = 600 * time.Millisecond
		const work = 3 * ttl
		a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
		la, err := a.TryLock(ctx, "dlock:slow", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(work)
		for time.Now().Before(deadline) {
			if lb, err := b.TryLock(ctx, "dlock:slow", dlock.WithTTL(ttl)); err == nil {
				t.Fatalf("B acquired (token %d) while A still worked", lb.Token())
			} else if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatal(err)
			}
			time.Sleep(ttl / 10)
		}
		if la.Err() != nil {
			t.Fatalf("A's lease ended during its work: %v", la.Err())
		}
		if err := la.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

package dlock_test

// Lost-lock signal: whatever takes the lock away, the holder's Done closes,
// Err says ErrLockLost, and — where the store still holds the key — before
// anyone else can acquire it.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

func TestLostWhenKeyDeletedBehindHolder(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	const ttl = 300 * time.Millisecond
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := c.TryLock(ctx, "deleted", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, leasecheck.LockKey("deleted"))
	// The next renewal (at most TTL/3 away) finds the key gone.
	leasecheck.WaitDone(t, l, 10*ttl)
	if !errors.Is(l.Err(), dlock.ErrLockLost) || !errors.Is(leaseCause(l), dlock.ErrLockLost) {
		t.Fatalf("Err %v", l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease: %v, want ErrNotHeld", err)
	}
}

func TestLostWhenRedisRestartsEmpty(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	const ttl = 300 * time.Millisecond
	ctx := leasecheck.Context(t, 20*time.Second)
	l, err := c.TryLock(ctx, "restart", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Restart()
	leasecheck.WaitDone(t, l, 20*ttl)
	if !errors.Is(l.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err %v", l.Err())
	}
	// The fencing counter was lost with the data, yet the next token is
	// still larger: tokens are seeded from the server clock.
	l2, err := leasecheck.NewLocker(t, srv.Addr()).Lock(ctx, "restart")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token after empty restart %d <= %d", l2.Token(), l.Token())
	}
	_ = l2.Unlock(ctx)
}

// Replies delayed past the validity deadline: the holder must give up the
// lock before the key can expire in Redis, i.e. before anyone else gets in.
func TestLostBeforeExpiryWhenRepliesAreDelayed(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	holder := leasecheck.NewLocker(t, proxy.Addr())
	rival := leasecheck.NewLocker(t, srv.Addr())
	const ttl = 300 * time.Millisecond
	ctx := leasecheck.Context(t, 20*time.Second)
	l, err := holder.TryLock(ctx, "slow-replies", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(10 * ttl) // renewals still reach Redis; their answers don't come back in time
	proxy.Blackhole(true)      // and now nothing reaches Redis either
	// The rival polls directly (no notification will come); the moment it
	// gets in, the holder must already have known its lease was over.
	for {
		l2, err := rival.TryLock(ctx, "slow-replies", dlock.WithTTL(ttl))
		if errors.Is(err, dlock.ErrNotAcquired) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Err reads the clock itself: it is the check a holder makes before
		// touching the resource, exact however late the renewal goroutine
		// runs. Done is closed by that goroutine, or by this Err call if it
		// comes first (a CPU-starved process is a paused one: fencing's job).
		if l.Err() == nil {
			t.Fatal("rival acquired while the holder still believed it held the lock")
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Err reported the lease over but Done is still open")
		}
		if !errors.Is(l.Err(), dlock.ErrLockLost) || l2.Token() <= l.Token() {
			t.Fatalf("holder Err %v; tokens %d then %d", l.Err(), l.Token(), l2.Token())
		}
		_ = l2.Unlock(ctx)
		return
	}
}

// Renewals that arrive but whose replies are slow (yet within the deadline)
// must keep the lease: latency alone is not loss.
func TestSlowButTimelyRenewalsKeepLease(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	holder := leasecheck.NewLocker(t, proxy.Addr())
	const ttl = 600 * time.Millisecond
	ctx := leasecheck.Context(t, 20*time.Second)
	l, err := holder.TryLock(ctx, "slow-ok", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(ttl / 10)
	select {
	case <-l.Done():
		t.Fatalf("lease lost under %v latency: %v", ttl/10, l.Err())
	case <-time.After(5 * ttl):
	}
	proxy.SetLatency(0)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A grant whose reply arrives after the lease's validity deadline must not
// become a lease: by then the lock may have expired for everyone else.
func TestGrantArrivingAfterDeadlineIsRefused(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	c := leasecheck.NewLocker(t, proxy.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	const ttl = 50 * time.Millisecond
	proxy.SetLatency(2 * ttl)
	for name, call := range map[string]func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error){"TryLock": c.TryLock, "Lock": c.Lock} {
		l, err := call(ctx, "too-slow", dlock.WithTTL(ttl))
		if l != nil || !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("%s through a store slower than the TTL: lease %v, err %v; want ErrBackend", name, l, err)
		}
	}
	proxy.SetLatency(0)
	l, err := c.Lock(ctx, "too-slow", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("after latency is gone: %v", err)
	}
	_ = l.Unlock(ctx)
}

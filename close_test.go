package dlock_test

// Close and Unlock against a real redis-server: what they leave behind when
// the store is slow, a call is in flight, or the caller's context is done.

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// newProxiedLocker returns a Client whose go-redis client reaches srv
// through a fault-injecting proxy; the go-redis client is returned so the
// test can close it after the Client, as an application does.
func newProxiedLocker(t *testing.T, srv *redisserver.Server) (*dlock.Client, *redis.Client, *redisserver.Proxy) {
	t.Helper()
	proxy := redisserver.NewProxy(t, srv.Addr())
	rdb := redisserver.NewClient(t, proxy.Addr())
	return leasecheck.NewLockerOn(t, rdb, nil), rdb, proxy
}

// Close must end leases at once, not after a renewal in flight against a
// slow store has returned: until then a rival may already hold the lock.
func TestCloseEndsLeasesWhileARenewalIsStuck(t *testing.T) {
	srv := redisserver.Start(t)
	c, _, proxy := newProxiedLocker(t, srv)
	const ttl = 900 * time.Millisecond
	l, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "stuck", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(time.Hour)
	time.Sleep(ttl/3 + 50*time.Millisecond) // let the renewal at TTL/3 go out and hang
	start := time.Now()
	go func() { _ = c.Close() }()
	for l.Err() == nil {
		if time.Since(start) > ttl/3 {
			t.Fatalf("lease still held %v after Close began, with a renewal stuck", time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(l.Err(), dlock.ErrClosed) {
		t.Fatalf("Err() = %v, want ErrClosed", l.Err())
	}
	proxy.SetLatency(0)
}

// An acquisition in flight when Close is called, then the application
// closes its go-redis client: the key must not stay held by nobody.
func TestCloseLeavesNoOrphanedAcquisition(t *testing.T) {
	srv := redisserver.Start(t)
	c, rdb, proxy := newProxiedLocker(t, srv)
	if _, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "warm", dlock.WithTTL(time.Minute)); err != nil {
		t.Fatal(err) // warms the connection and the script cache
	}
	proxy.SetLatency(300 * time.Millisecond)
	locked := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), "orphan", dlock.WithTTL(time.Minute))
		locked <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire request is on its way
	_ = c.Close()
	_ = rdb.Close()
	if err := <-locked; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock = %v, want ErrClosed", err)
	}
	direct := srv.Client(t)
	if leasecheck.IsHeld(t, direct, "orphan") {
		t.Fatalf("the key is held by nobody after Close (PTTL %v)", direct.PTTL(context.Background(), leasecheck.LockKey("orphan")).Val())
	}
}

// Unlock with a context that is already done ends the lease and still
// frees the key, instead of leaving it held for its TTL.
func TestUnlockWithDoneContextStillFreesTheKey(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	l, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "deferred", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, cancel := context.WithCancel(context.Background())
	cancel() // the request finished before the deferred Unlock ran
	if err := l.Unlock(reqCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock = %v, want context.Canceled", err)
	}
	waitFreed(t, srv.Client(t), 5*time.Second, "deferred")
}

// Close with many leases releases them in batches, not one goroutine each.
func TestCloseWithManyLeasesIsBatched(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	const n = 5000
	ctx := leasecheck.Context(t, time.Minute)
	for i := range n {
		if _, err := c.TryLock(ctx, "many-"+strconv.Itoa(i), dlock.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var closeErr error
	before, peak := probe.PeakGoroutines(func() { closeErr = c.Close() })
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	if peak > before+20 {
		t.Fatalf("Close with %d leases peaked at %d goroutines (%d before)", n, peak, before)
	}
	if keys := srv.Client(t).DBSize(ctx).Val(); keys != 0 {
		// Released locks become ':last' values; only those may remain.
		left, _ := srv.Client(t).Keys(ctx, "dlock:{many-*}").Result()
		if len(left) > 0 {
			t.Fatalf("%d lock keys left after Close, e.g. %v", len(left), left[0])
		}
	}
}

// Unlock(nil) is bad input: a typed error, and still no lock left held.
func TestUnlockWithNilContext(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	l, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "nilctx", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := l.Unlock(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Unlock(nil) = %v, want ErrInvalidArgument", err)
	}
	if !errors.Is(l.Err(), dlock.ErrReleased) {
		t.Fatalf("Err() = %v after Unlock(nil), want ErrReleased", l.Err())
	}
	waitFreed(t, srv.Client(t), 5*time.Second, "nilctx")
}

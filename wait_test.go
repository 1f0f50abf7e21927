package dlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// countingDriver counts acquisition attempts and reports each one.
type countingDriver struct {
	driver.Driver
	attempts atomic.Int64
	seen     chan struct{}
}

func (d *countingDriver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	d.attempts.Add(1)
	select {
	case d.seen <- struct{}{}:
	default:
	}
	return d.Driver.Acquire(ctx, req)
}

func newCountingLocker(t *testing.T, addr string) (*dlock.Client, *countingDriver) {
	t.Helper()
	var cd *countingDriver
	c := leasecheck.NewLockerOn(t, redisserver.NewClient(t, addr), func(d driver.Driver) driver.Driver {
		cd = &countingDriver{Driver: d, seen: make(chan struct{}, 1024)}
		return cd
	})
	return c, cd
}

// A waiter must learn of a release by notification: with a 30 s TTL the
// fallback timer would not fire within the test's 10 s.
func TestWaiterWokenByReleaseNotification(t *testing.T) {
	srv := redisserver.Start(t)
	holder := leasecheck.NewLocker(t, srv.Addr())
	waiter, counter := newCountingLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := holder.Lock(ctx, "notify", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "notify", dlock.WithTTL(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	// Two attempts mean the waiter has subscribed and is now asleep.
	<-counter.seen
	<-counter.seen
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.Fatal("waiter did not get the lock")
	}
	t.Logf("handoff after release: %v", time.Since(start))
	if l2.Token() <= l.Token() {
		t.Fatalf("tokens %d then %d", l.Token(), l2.Token())
	}
	_ = l2.Unlock(ctx)
}

// Many goroutines of one client waiting for one key cost one attempt per
// release, not one per waiter: only the first in line is woken.
func TestLocalWaitersDoNotStampede(t *testing.T) {
	srv := redisserver.Start(t)
	holder := leasecheck.NewLocker(t, srv.Addr())
	waiters, counter := newCountingLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	const n = 10
	l, err := holder.Lock(ctx, "herd", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiters.Lock(ctx, "herd", dlock.WithTTL(30*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			_ = l.Unlock(ctx)
		}()
	}
	// Every waiter makes two attempts before it sleeps.
	for range 2 * n {
		<-counter.seen
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// 2 per waiter to start, then about one per handoff; a stampede would
	// be n per handoff (~n²/2 in all).
	extra := counter.attempts.Load() - 2*n
	t.Logf("attempts after the first release: %d for %d waiters", extra, n)
	if extra > 2*n {
		t.Fatalf("%d attempts for %d handoffs: waiters stampede", extra, n)
	}
}

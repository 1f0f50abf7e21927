package dlock_test

// Leases on the in-memory store: the renewal loop and the end of a lease at
// its deadline, whatever the store. Against a real redis-server:
// lease_redis_test.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/memdriver"
)

// renewCounter counts Renew calls and the leases they carry.
type renewCounter struct {
	driver.Driver
	calls, leases atomic.Int64
}

func (d *renewCounter) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	d.calls.Add(1)
	d.leases.Add(int64(len(reqs)))
	return d.Driver.Renew(ctx, reqs)
}

// Holding many leases costs a heap entry each, not a goroutine or a timer,
// and their renewals go out in batches.
func TestManyLeasesShareOneRenewalLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 5000 leases")
	}
	rc := &renewCounter{Driver: memdriver.New()}
	c := newMemLocker(t, rc)
	const n = 5000
	const ttl = 3 * time.Second
	ctx := leasecheck.Context(t, time.Minute)
	before := runtime.NumGoroutine()
	leases := make([]*dlock.Lease, n)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				l, err := c.TryLock(ctx, fmt.Sprintf("many:%d", i), dlock.WithTTL(ttl))
				if err != nil {
					t.Error(err)
					return
				}
				leases[i] = l
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if grown := runtime.NumGoroutine() - before; grown > 10 {
		t.Fatalf("%d goroutines more while holding %d leases", grown, n)
	}
	// Wait until every lease has been renewed at least once.
	for rc.leases.Load() < n {
		select {
		case <-leases[0].Done():
			t.Fatalf("lease lost: %v", leases[0].Err())
		case <-time.After(ttl / 10):
		}
	}
	calls, renewed := rc.calls.Load(), rc.leases.Load()
	t.Logf("%d renewals in %d calls", renewed, calls)
	if calls > renewed/50 {
		t.Fatalf("%d renewals took %d calls: not batched", renewed, calls)
	}
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("%s: %v", l.Key(), l.Err())
		}
	}
}

// A log handler that blocks must not freeze expiry. The first lost lease
// makes the Client log; with the handler stuck, a second fixed lease must
// still end at its deadline, before a rival can take the lock.
func TestBlockingLoggerDoesNotFreezeExpiry(t *testing.T) {
	bh := probe.NewBlocking()
	defer close(bh.Release) // before the Clients close: they flush their logs
	a, store := newMemClient(t, nil, dlock.WithLogger(slog.New(bh)))
	b, _ := newMemClient(t, store)
	ctx := leasecheck.Context(t, 30*time.Second)
	const ttl = 100 * time.Millisecond
	first, err := a.TryLock(ctx, "first", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	leasecheck.WaitDone(t, first, 20*ttl) // lost at its deadline: a is now logging, stuck
	second, err := a.TryLock(ctx, "second", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	rival, err := b.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Unlock(ctx)
	// Done first: Err would end the lease itself on seeing the deadline
	// passed, and so close Done even with the renewal loop stuck in the
	// handler. Done must have been closed by that loop, at the deadline.
	select {
	case <-second.Done():
	case <-time.After(10 * ttl):
		t.Fatalf("Done still open %v after the rival took the lock: the renewal loop is stuck", 10*ttl)
	}
	if second.Err() == nil || second.Context().Err() == nil {
		t.Fatal("the rival holds the lock and the old lease still reports itself held")
	}
}

// A lost lease's Err says why, and still matches ErrLockLost: a store that
// took the lock away reads differently from one that could not be reached
// before the deadline.
func TestLostLeaseSaysWhy(t *testing.T) {
	ctx := leasecheck.Context(t, 30*time.Second)
	const ttl = 300 * time.Millisecond

	a, store := newMemClient(t, nil)
	taken, err := a.Lock(ctx, "taken", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.ForceRelease(ctx, "taken"); err != nil || !ok {
		t.Fatalf("ForceRelease: %v, %v", ok, err)
	}
	leasecheck.WaitDone(t, taken, 20*ttl)
	if err := taken.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), "no longer had it") {
		t.Fatalf("lease broken by ForceRelease: Err %v, want ErrLockLost saying the store no longer had it", err)
	}

	b, drv := newMemClient(t, store)
	cut, err := b.Lock(ctx, "cut", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	outage := errors.New("store unreachable")
	drv.SetFault(func(context.Context, string) error { return outage })
	defer drv.SetFault(nil)
	leasecheck.WaitDone(t, cut, 20*ttl)
	if err := cut.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("lease whose renewals failed: Err %v, want ErrLockLost saying its deadline passed", err)
	}
	if cause := context.Cause(cut.Context()); cause != cut.Err() {
		t.Fatalf("Context's cause %v, Err %v: want the same error", cause, cut.Err())
	}
}

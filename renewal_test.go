package dlock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A renewal that fails (network blip) must be retried, not abandoned: the
// lease survives an outage shorter than its validity window.
func TestRenewalSurvivesShortOutage(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	c := leasecheck.NewLocker(t, proxy.Addr())
	const ttl = 1500 * time.Millisecond
	ctx := leasecheck.Context(t, 20*time.Second)
	l, err := c.TryLock(ctx, "blip", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// Black-hole long enough to make at least one renewal (every 500 ms)
	// fail, short enough to leave time for a retry before the deadline.
	proxy.Blackhole(true)
	time.Sleep(ttl / 2)
	proxy.Blackhole(false)
	proxy.CloseAll() // the black-holed connections are garbage now
	// Outlast the original deadline by a whole TTL: only renewals after the
	// outage can have kept the lease.
	select {
	case <-l.Done():
		t.Fatalf("lease lost after a %v outage: %v", ttl/2, l.Err())
	case <-time.After(2 * ttl):
	}
	if pttl := srv.Client(t).PTTL(ctx, leasecheck.LockKey("blip")).Val(); pttl <= 0 {
		t.Fatalf("lock key PTTL %v after the outage", pttl)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

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
	srv := redisserver.Start(t)
	var rc *renewCounter
	c := leasecheck.NewLockerOn(t, redisserver.NewClient(t, srv.Addr()), func(d driver.Driver) driver.Driver {
		rc = &renewCounter{Driver: d}
		return rc
	})
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

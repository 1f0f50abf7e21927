package dlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// The Locks and Unlocks that a Client's goroutines make while one is in
// flight go to the store together, in the next call: 16 of each at once
// over a slow link take fewer round trips than 16, and every one does
// what it would alone (a lease with its own token; then nil, and the name
// free for another Client).
func TestConcurrentCallsShareARoundTrip(t *testing.T) {
	srv := redisserver.Start(t)
	admin := redisserver.NewClient(t, srv.Addr())
	proxy := redisserver.NewProxy(t, srv.Addr())
	rdb := redisserver.NewClient(t, proxy.Addr())
	var trips tripCounter
	rdb.AddHook(&trips)
	c := leasecheck.NewLockerOn(t, rdb, nil)
	other := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	warm, err := c.Lock(ctx, "warm-up") // dials, and caches the scripts
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 16
	proxy.SetLatency(50 * time.Millisecond) // the first call is in flight while the others come
	concurrently := func(what string, f func(i int) error) {
		t.Helper()
		before := trips.n.Load()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
		}
		sent := trips.n.Load() - before
		t.Logf("%d concurrent %ss: %d round trips", n, what, sent)
		if sent >= n {
			t.Errorf("%d concurrent %ss took %d round trips, want fewer: none went together", n, what, sent)
		}
	}
	leases := make([]*dlock.Lease, n)
	concurrently("Lock", func(i int) (err error) {
		leases[i], err = c.Lock(ctx, "batch-"+strconv.Itoa(i))
		return err
	})
	for i, l := range leases {
		if l.Token() == 0 || l.Key() != "batch-"+strconv.Itoa(i) {
			t.Errorf("lease %d: key %q, token %d", i, l.Key(), l.Token())
		}
		if _, err := other.TryLock(ctx, l.Key()); err == nil {
			t.Errorf("%s: another Client took it while it was held", l.Key())
		}
	}
	before := commandCalls(t, admin)
	concurrently("Unlock", func(i int) error { return leases[i].Unlock(ctx) })
	t.Logf("%d concurrent Unlocks: %d script calls", n, commandCalls(t, admin)["evalsha"]-before["evalsha"])
	for i := range leases {
		l, err := other.TryLock(ctx, "batch-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("batch-%d after its Unlock: %v", i, err)
		}
		_ = l.Unlock(context.Background())
	}
}

package dlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/redistest"
)

// Unlocks that a Client's goroutines make while one is in flight go to
// the store together, in the next release call: 16 leases released at
// once over a slow link take fewer script calls than 16, and every one is
// released (nil, and the name free for another Client).
func TestConcurrentUnlocksShareAScriptCall(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.NewClient(t, srv.Addr())
	proxy := redistest.NewProxy(t, srv.Addr())
	c := newLocker(t, proxy.Addr())
	other := newLocker(t, srv.Addr())
	ctx := ctxTimeout(t, 20*time.Second)
	const n = 16
	leases := make([]*dlock.Lease, n)
	for i := range leases {
		l, err := c.Lock(ctx, "batch-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	proxy.SetLatency(50 * time.Millisecond) // the first release is in flight while the others come
	before := commandCalls(t, admin)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, l := range leases {
		wg.Go(func() { errs[i] = l.Unlock(ctx) })
	}
	wg.Wait()
	calls := commandCalls(t, admin)["evalsha"] - before["evalsha"]
	for i, err := range errs {
		if err != nil {
			t.Errorf("Unlock %d: %v", i, err)
		}
	}
	if calls >= n {
		t.Errorf("%d concurrent Unlocks took %d script calls, want fewer: none went together", n, calls)
	}
	t.Logf("%d concurrent Unlocks: %d script calls", n, calls)
	for i := range leases {
		l, err := other.TryLock(ctx, "batch-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("batch-%d after its Unlock: %v", i, err)
		}
		_ = l.Unlock(context.Background())
	}
}

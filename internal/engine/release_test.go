package engine

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// holdMany takes n leases on e, renewed until released.
func holdMany(t *testing.T, e *Engine, n int) {
	t.Helper()
	for i := range n {
		if _, err := e.Acquire(context.Background(), lockReq("k"+strconv.Itoa(i), time.Minute, false, true)); err != nil {
			t.Fatal(err)
		}
	}
}

// Close during an outage gives up releasing once a batch goes unanswered
// for closeCallTimeout, instead of spending closeDrainTimeout on a store
// that is not there: a service shutting down must not hang. What it could
// not release expires with its TTL.
func TestCloseGivesUpOnAStoreThatDoesNotAnswer(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	holdMany(t, e, 2500) // three batches
	var calls atomic.Int32
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRelease {
			calls.Add(1)
			<-ctx.Done()
		}
		return nil
	})
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// closeCallTimeout, and the rest of Close; closeDrainTimeout would be
	// 5 s. A generous bound: the property is that it is not the drain's.
	if took := time.Since(start); took >= closeDrainTimeout-time.Second {
		t.Fatalf("Close took %v with a silent store; it gives up after %v", took, closeCallTimeout)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d release calls to a silent store at Close, want 1", n)
	}
}

// A store that refuses every call at Close (a connection refused at once)
// gets one release call, not one per batch.
func TestCloseStopsReleasingAfterAFailedBatch(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	holdMany(t, e, 2500)
	refused := errors.New("connection refused")
	var calls atomic.Int32
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRelease {
			calls.Add(1)
			return refused
		}
		return nil
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d release calls to a refusing store at Close, want 1", n)
	}
}

// A store that answers gets every batch at Close: giving up is for a store
// that fails.
func TestCloseReleasesEveryBatch(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	holdMany(t, e, 2500)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k0", "k1234", "k2499"} {
		if held(t, drv, k) {
			t.Fatalf("%s still held after Close", k)
		}
	}
}

// An Unlock whose release fails (a store briefly refusing, a Cluster slot
// being migrated for longer than the driver's retries) keeps being
// released in the background until the store takes it or the lease's TTL
// ends: the lock is not left held by nobody until it expires. Before, the
// background release was tried once.
func TestFailedUnlockIsRetriedUntilTheTTL(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	h, err := e.Acquire(context.Background(), lockReq("k", 10*time.Second, false, true))
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("TRYAGAIN slot being migrated")
	var calls atomic.Int32
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRelease && calls.Add(1) <= 4 {
			return refused
		}
		return nil
	})
	if err := e.Release(context.Background(), h); !errors.Is(err, ErrBackend) {
		t.Fatalf("Release with the store refusing: %v, want a backend error", err)
	}
	eventually(t, 5*time.Second, "the lock released by the background retries", func() bool { return !held(t, drv, "k") })
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d release calls, want 5 (the Unlock's, three failed retries, the one that worked)", n)
	}
}

// The retries of a failed release stop once the lease's TTL has passed:
// the lock has expired in the store by then, whatever became of them.
func TestFailedUnlockRetriesStopAtTheTTL(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	const ttl = 300 * time.Millisecond
	h, err := e.Acquire(context.Background(), lockReq("k", ttl, false, true))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRelease {
			calls.Add(1)
			return errors.New("connection refused")
		}
		return nil
	})
	released := time.Now()
	if err := e.Release(context.Background(), h); !errors.Is(err, ErrBackend) {
		t.Fatalf("Release with the store refusing: %v, want a backend error", err)
	}
	eventually(t, 5*time.Second, "a retry", func() bool { return calls.Load() >= 2 })
	time.Sleep(time.Until(released.Add(ttl + releaseRetryMax))) // past the TTL and a retry's wait
	after := calls.Load()
	time.Sleep(2 * releaseRetryMax) // long enough for two more retries, were they made
	if n := calls.Load(); n != after {
		t.Fatalf("%d release calls after the TTL had passed, then %d: the retries go on", after, n)
	}
}

// A retried release waiting for its next try whose record is gone (a
// queued copy of it was sent meanwhile, or dropped from a full queue) is
// forgotten, not tried: before, takeDue read the missing record and the
// releaser's goroutine panicked.
func TestTakeDueForgetsAReleaseNoLongerRetried(t *testing.T) {
	e := newTestEngine(t, memdriver.New())
	r := e.releaser
	r.mu.Lock()
	r.waiting = append(r.waiting, driver.ReleaseRequest{Key: "gone", ID: "id"})
	next := r.takeDue()
	left, queued := len(r.waiting), len(r.queue)
	r.mu.Unlock()
	if next != 0 || left != 0 || queued != 0 {
		t.Fatalf("after takeDue: next try in %v, %d waiting, %d queued; want it forgotten", next, left, queued)
	}
}

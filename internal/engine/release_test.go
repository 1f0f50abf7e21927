package engine

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

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

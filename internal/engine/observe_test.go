package engine

import (
	"context"
	"testing"
	"time"
)

// nopObserver counts nothing and returns at once: the cheapest observer,
// so a benchmark with it measures the engine's side of observing.
type nopObserver struct{}

func (nopObserver) Acquire(AcquireEvent)           {}
func (nopObserver) Release(ReleaseEvent)           {}
func (nopObserver) Renew(RenewEvent)               {}
func (nopObserver) Lost(LostEvent)                 {}
func (nopObserver) Wait(WaitEvent)                 {}
func (nopObserver) BackendError(BackendErrorEvent) {}

// Without an Observer, observing an acquire+release cycle — the counters
// Stats reads included — allocates nothing.
func TestObservingWithoutObserverAllocatesNothing(t *testing.T) {
	e := newTestEngine(t, nil)
	ctx := context.Background()
	h, err := e.Acquire(ctx, lockReq("k", 30*time.Second, false, true))
	if err != nil {
		t.Fatal(err)
	}
	a := e.lockAttempt(req("k", 30*time.Second), true)
	batch := renewal{holds: []*Hold{h}, held: []bool{true}}
	allocs := testing.AllocsPerRun(1000, func() {
		op := e.startAcquire(&a)
		e.doneAcquire(ctx, op, a, h, nil)
		e.doneAcquire(ctx, op, a, nil, ErrNotAcquired)
		observed := e.waiting(a, true, false)
		e.waiting(a, false, observed)
		e.doneRelease(ctx, h, time.Now(), nil)
		e.renewed(batch, time.Now())
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per observed cycle without an Observer", allocs)
	}
}

// BenchmarkObserveOverhead is BenchmarkEngineOverhead without and with an
// Observer (one that returns at once): what observing adds to the
// engine's own cost per acquire+release cycle.
func BenchmarkObserveOverhead(b *testing.B) {
	for _, tc := range []struct {
		name string
		obs  Observer
	}{{"none", nil}, {"observer", nopObserver{}}} {
		b.Run(tc.name, func(b *testing.B) {
			e := newTestEngine(b, nil, func(c *Config) { c.Observer = tc.obs })
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				h, err := e.Acquire(ctx, lockReq("k", 30*time.Second, false, true))
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Release(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A busy engine hands events over in batches, about one per
// observerLinger, not one goroutine wake-up per event.
func TestObserverEventsComeInBatches(t *testing.T) {
	e := newTestEngine(t, nil, func(c *Config) { c.Observer = nopObserver{} })
	ctx := context.Background()
	start := time.Now()
	const cycles = 500
	for range cycles {
		h, err := e.Acquire(ctx, lockReq("k", 30*time.Second, false, true))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond) // a cycle as long as a loopback round trip, roughly
	}
	elapsed := time.Since(start)
	batches := e.obs.batches.Load()
	if max := int64(elapsed/observerLinger) + 2; batches > max {
		t.Fatalf("%d batches for %d events in %v; want at most %d", batches, 2*cycles, elapsed, max)
	}
	t.Logf("%d events in %d batches over %v", 2*cycles, batches, elapsed)
}

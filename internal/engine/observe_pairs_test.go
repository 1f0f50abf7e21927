package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// gaugeObserver keeps the gauges the metrics packages build on the events
// (leases held, waiters), and holds its first event until gate is closed:
// an Observer that stalls long enough for the queue to overflow.
type gaugeObserver struct {
	nopObserver
	gate chan struct{}
	once sync.Once

	mu             sync.Mutex
	held, waiters  int
	lowest, events int
}

func (o *gaugeObserver) add(held, waiters int) {
	o.once.Do(func() { <-o.gate })
	o.mu.Lock()
	o.held += held
	o.waiters += waiters
	o.lowest = min(o.lowest, o.held, o.waiters)
	o.events++
	o.mu.Unlock()
}

func (o *gaugeObserver) Acquire(ev AcquireEvent) {
	if ev.Result == ResultAcquired {
		o.add(1, 0)
	} else {
		o.add(0, 0)
	}
}

func (o *gaugeObserver) Release(ev ReleaseEvent) {
	if ev.WasHeld {
		o.add(-1, 0)
	} else {
		o.add(0, 0)
	}
}

func (o *gaugeObserver) Lost(LostEvent) { o.add(-1, 0) }

func (o *gaugeObserver) Wait(ev WaitEvent) {
	if ev.Started {
		o.add(0, 1)
	} else {
		o.add(0, -1)
	}
}

// queued is how many events wait in e's observer queue.
func queued(e *Engine) int {
	e.obs.mu.Lock()
	defer e.obs.mu.Unlock()
	return len(e.obs.buf)
}

// When the observer queue overflows, a lease's or a waiter's start and end
// events are dropped together or delivered together, so that the gauges
// built on them end at zero once everything has ended. Before, the
// queue dropped whatever came while it was full: a lease whose start was
// dropped and whose end was delivered took the held gauge below zero, and
// one whose end was dropped left it above zero for good.
func TestDroppedEventsKeepGaugesPaired(t *testing.T) {
	o := &gaugeObserver{gate: make(chan struct{})}
	e := newTestEngine(t, nil, func(c *Config) { c.Observer = o })
	ctx := context.Background()
	const ttl = 30 * time.Second
	must := func(h *Hold, err error) *Hold {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	// Before the overflow: A's and C's starts are queued.
	a := must(e.TryAcquire(ctx, req("a", ttl), true))
	c := must(e.TryAcquire(ctx, req("c", ttl), true))
	for e.Stats().Dropped == 0 {
		h := must(e.TryAcquire(ctx, req("fill", ttl), true))
		if err := e.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	// While the queue is full: B's start is dropped, and so are those of
	// a plain and a fair waiter of C; A's end must still be queued.
	b := must(e.TryAcquire(ctx, req("b", ttl), true))
	var wg sync.WaitGroup
	defer wg.Wait()
	got := make(chan *Hold, 2)
	wg.Go(func() {
		h, err := e.Acquire(ctx, req("c", ttl), true)
		if err != nil {
			t.Error(err)
		}
		got <- h
	})
	wg.Go(func() {
		h, err := e.AcquireQueued(ctx, driver.QueueRequest{Key: "c", TTL: ttl, Mode: driver.ModeExclusive}, true)
		if err != nil {
			t.Error(err)
		}
		got <- h
	})
	for e.Stats().Waiters != 2 {
		time.Sleep(time.Millisecond) // polling a counter: no event tells the test
	}
	if err := e.Release(ctx, a); err != nil {
		t.Fatal(err)
	}
	// The Observer catches up; then B's end and the waiters' ends come.
	close(o.gate)
	for queued(e) > 0 {
		time.Sleep(time.Millisecond)
	}
	if err := e.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		h := <-got
		if h == nil {
			t.FailNow()
		}
		if err := e.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != 0 || o.waiters != 0 || o.lowest < 0 {
		t.Errorf("after everything ended: held gauge %d, waiters gauge %d, lowest %d over %d events (%d dropped); want 0, 0, 0",
			o.held, o.waiters, o.lowest, o.events, e.Stats().Dropped)
	}
}

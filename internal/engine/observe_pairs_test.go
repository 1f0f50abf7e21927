package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
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
	a := must(e.Acquire(ctx, lockReq("a", ttl, false, true)))
	c := must(e.Acquire(ctx, lockReq("c", ttl, false, true)))
	for e.Stats().ObserverDropped == 0 {
		h := must(e.Acquire(ctx, lockReq("fill", ttl, false, true)))
		if err := e.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	// While the queue is full: B's start is dropped, and so are those of
	// a plain and a fair waiter of C; A's end must still be queued.
	b := must(e.Acquire(ctx, lockReq("b", ttl, false, true)))
	var wg sync.WaitGroup
	defer wg.Wait()
	got := make(chan *Hold, 2)
	wg.Go(func() {
		h, err := e.Acquire(ctx, lockReq("c", ttl, true, true))
		if err != nil {
			t.Error(err)
		}
		got <- h
	})
	wg.Go(func() {
		h, err := e.Acquire(ctx, Request{Queued: true, Key: "c", TTL: ttl, Mode: driver.ModeExclusive, Wait: true, Renew: true})
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
			o.held, o.waiters, o.lowest, o.events, e.Stats().ObserverDropped)
	}
}

// A multi-lock one of whose locks is lost ends the others too; each of
// them ends once in the events (Lost, reason group), so the held gauge
// comes back to zero. Before, only the lost lock had an end: the others
// were ended without an event, and the later release reported them not
// held, which left the gauge up by two for good.
func TestGroupLossEndsEveryLock(t *testing.T) {
	o := &gaugeObserver{gate: make(chan struct{})}
	close(o.gate)
	var reasons []string
	var mu sync.Mutex
	drv := memdriver.New()
	e := newTestEngine(t, drv, func(c *Config) { c.Observer = lostReasons{o, &mu, &reasons} })
	ctx := context.Background()
	const ttl = 1500 * time.Millisecond // renewed every 500 ms: the next renewal finds b not held
	g, err := e.AcquireAll(ctx, []driver.AcquireRequest{req("a", ttl), req("b", ttl), req("c", ttl)}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := drv.ForceRelease(ctx, "b"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	<-g.Done()
	for ended := false; !ended; time.Sleep(time.Millisecond) { // the group's watch ends the others just after
		ended = true
		for _, h := range g.holds {
			ended = ended && h.ended.Load()
		}
	}
	_ = e.ReleaseGroup(ctx, g)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	held := o.held
	o.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(reasons)
	if held != 0 || !slices.Equal(reasons, []string{LostGroup, LostGroup, LostNotHeld}) {
		t.Errorf("after the multi-lock lost b: held gauge %d, lost reasons %q; want 0 and [group group not_held]", held, reasons)
	}
	if s := e.Stats(); s.Lost != 3 {
		t.Errorf("Stats.Lost %d, want 3", s.Lost)
	}
}

// lostReasons records the reasons of Lost events, and passes every event on.
type lostReasons struct {
	*gaugeObserver
	mu      *sync.Mutex
	reasons *[]string
}

func (l lostReasons) Lost(ev LostEvent) {
	l.mu.Lock()
	*l.reasons = append(*l.reasons, ev.Reason)
	l.mu.Unlock()
	l.gaugeObserver.Lost(ev)
}

// Close racing acquisitions ends leases whose acquisition is not recorded
// yet; their Lost (closed) still comes after their Acquire, so the held
// gauge never dips below zero, even for a moment. Before, such an end
// was queued first.
func TestCloseRacingAcquisitionsKeepsEventOrder(t *testing.T) {
	lowest := 0
	for round := range 100 {
		o := &gaugeObserver{gate: make(chan struct{})}
		close(o.gate)
		e := newTestEngine(t, nil, func(c *Config) { c.Observer = o })
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					if _, err := e.Acquire(context.Background(), lockReq(fmt.Sprintf("r%d-%d-%d", round, g, i), 30*time.Second, false, true)); err != nil {
						return // closed
					}
				}
			})
		}
		for e.Stats().Acquired < 50 {
			runtime.Gosched()
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		o.mu.Lock()
		lowest = min(lowest, o.lowest)
		if o.held != 0 {
			t.Errorf("round %d: held gauge %d after Close, want 0", round, o.held)
		}
		o.mu.Unlock()
	}
	if lowest < 0 {
		t.Errorf("the held gauge went down to %d: a lease's end was delivered before its start", lowest)
	}
}

package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// Stats reports leases held and waiters as they are now.
func TestStatsGauges(t *testing.T) {
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := leasecheck.Context(t, 10*time.Second)
	var leases []*dlock.Lease
	for _, k := range []string{"x", "y", "z"} {
		l, err := c.TryLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if s := c.Stats(); s.Held != 3 || s.Acquired != 3 || s.Waiters != 0 {
		t.Fatalf("after three locks: %+v", s)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Lock(wctx, "x"); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().Waiters != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never showed in Stats")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v", err)
	}
	for _, l := range leases {
		_ = l.Unlock(ctx)
	}
	if s := c.Stats(); s.Held != 0 || s.Waiters != 0 || s.Released != 3 {
		t.Fatalf("after unlocking: %+v", s)
	}
}

// A renewal the store has not answered shows in Stats until it is.
func TestStatsRenewalsInFlight(t *testing.T) {
	store := memdriver.New()
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	store.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRenew {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-unblock:
			case <-ctx.Done():
			}
		}
		return nil
	})
	c, err := dlock.New(store, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := c.TryLock(ctx, "k", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("no renewal reached the store")
	}
	if s := c.Stats(); s.RenewalsInFlight != 1 || s.Held != 1 {
		t.Fatalf("with a renewal stuck in the store: %+v", s)
	}
	close(unblock)
	deadline := time.Now().Add(5 * time.Second)
	for c.Stats().RenewalsInFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("renewal still in flight after it was answered: %+v", c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease after its renewal was answered: %v", err)
	}
}

// A multi-lock reports each lock it takes and releases as its own
// acquisition and release, and a failed call as one acquisition named
// after its keys: every lease starts and ends once in the events.
func TestObserverSeesMultiLocks(t *testing.T) {
	o := newRecorder()
	c, err := dlock.New(memdriver.New(), dlock.WithObserver(o), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := leasecheck.Context(t, 10*time.Second)
	m, err := c.TryLockAll(ctx, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLockAll(ctx, []string{"a", "c"}); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLockAll over a held lock: %v", err)
	}
	if s := c.Stats(); s.Held != 2 || s.Acquired != 2 {
		t.Fatalf("Stats while held: %+v", s)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	o.mu.Lock()
	defer o.mu.Unlock()
	acquired, busy := map[string]int{}, 0
	for _, e := range o.acq {
		switch e.Result {
		case dlock.ResultAcquired:
			acquired[e.Key]++
		case dlock.ResultBusy:
			busy++
		}
	}
	if acquired["a"] != 1 || acquired["b"] != 1 || busy != 1 || len(o.acq) != 3 {
		t.Errorf("acquire events %+v", o.acq)
	}
	released := map[string]bool{}
	for _, e := range o.rel {
		if e.Result == dlock.ResultReleased && e.WasHeld {
			released[e.Key] = true
		}
	}
	if len(o.rel) != 2 || !released["a"] || !released["b"] || len(o.lost) != 0 {
		t.Errorf("release events %+v, lost %+v", o.rel, o.lost)
	}
	if s := c.Stats(); s.Held != 0 || s.Acquired != 2 || s.Released != 2 {
		t.Errorf("Stats after Unlock: %+v", s)
	}
}

// A fair lock's waiter holds a place in the store's queue while it waits:
// that place is no lease, so it is neither held in Stats nor an event, but
// the waiter is one of Stats' Waiters and starts and stops waiting in the
// events, as a plain waiter does; the grant is one acquisition, its Unlock
// one release.
func TestObserverSeesFairLocks(t *testing.T) {
	store := memdriver.New()
	o1, o2 := newRecorder(), newRecorder()
	c1, err := dlock.New(store, dlock.WithObserver(o1), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := dlock.New(store.Connect(), dlock.WithObserver(o2), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := leasecheck.Context(t, 10*time.Second)
	l1, err := c1.Lock(ctx, "k", dlock.WithFIFO())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := c2.Lock(ctx, "k", dlock.WithFIFO(), dlock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// The waiter's place is renewed like a lease (every TTL/3): wait for
	// its first renewal, then check it is not counted as held.
	o2.await(t, 5*time.Second, "a renewal of the waiter's place", func() bool { return len(o2.renew) > 0 })
	if s := c2.Stats(); s.Held != 0 || s.Waiters != 1 {
		t.Fatalf("c2 Stats while queued: %+v, want Held 0, Waiters 1", s)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if s := c2.Stats(); s.Held != 1 || s.Acquired != 1 || s.Waiters != 0 {
		t.Fatalf("c2 Stats when granted: %+v", s)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = c1.Close()
	_ = c2.Close()
	for name, o := range map[string]*recorder{"c1": o1, "c2": o2} {
		o.mu.Lock()
		if len(o.acq) != 1 || o.acq[0].Result != dlock.ResultAcquired || len(o.rel) != 1 || !o.rel[0].WasHeld || len(o.lost) != 0 {
			t.Errorf("%s: acquire %+v release %+v lost %+v", name, o.acq, o.rel, o.lost)
		}
		// The queued waiter starts and stops waiting once, like a plain one.
		wantWait := 0
		if name == "c2" {
			wantWait = 2
		}
		if len(o.wait) != wantWait {
			t.Errorf("%s: wait events %+v, want %d", name, o.wait, wantWait)
		} else if wantWait == 2 {
			w0, w1 := o.wait[0], o.wait[1]
			if !w0.Started || w0.Key != "k" || w0.Depth != 1 || w0.Waiters != 1 || w1.Started || w1.Depth != 0 || w1.Waiters != 0 {
				t.Errorf("c2 wait events %+v, want start (depth 1) and stop (depth 0) on k", o.wait)
			}
		}
		o.mu.Unlock()
	}
	if s := c2.Stats(); s.Held != 0 || s.Acquired != 1 || s.Released != 1 || s.Lost != 0 {
		t.Errorf("c2 Stats at the end: %+v", s)
	}
}

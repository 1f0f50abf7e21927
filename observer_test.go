package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu      sync.Mutex
	acq     []dlock.AcquireEvent
	rel     []dlock.ReleaseEvent
	renew   []dlock.RenewEvent
	lost    []dlock.LostEvent
	wait    []dlock.WaitEvent
	backend []dlock.BackendErrorEvent
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) add(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Acquire(e dlock.AcquireEvent) { r.add(func() { r.acq = append(r.acq, e) }) }
func (r *recorder) Release(e dlock.ReleaseEvent) { r.add(func() { r.rel = append(r.rel, e) }) }
func (r *recorder) Renew(e dlock.RenewEvent)     { r.add(func() { r.renew = append(r.renew, e) }) }
func (r *recorder) Lost(e dlock.LostEvent)       { r.add(func() { r.lost = append(r.lost, e) }) }
func (r *recorder) Wait(e dlock.WaitEvent)       { r.add(func() { r.wait = append(r.wait, e) }) }
func (r *recorder) BackendError(e dlock.BackendErrorEvent) {
	r.add(func() { r.backend = append(r.backend, e) })
}

// await waits until cond (called with r locked) holds, for at most d.
func (r *recorder) await(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-timeout:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// A scripted sequence on the in-memory store — acquire, contend, wait,
// lose (not ours; deadline), renewal failure, close — gives exactly these
// events and totals.
func TestObserverScriptedSequence(t *testing.T) {
	store := memdriver.New()
	d1, d2 := store, store.Connect()
	o1, o2 := newRecorder(), newRecorder()
	newClient := func(d *memdriver.Driver, o *recorder) *dlock.Client {
		c, err := dlock.New(d, dlock.WithObserver(o), dlock.WithLogger(leasecheck.QuietLogger()), dlock.WithRenewRetryDelay(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c1, c2 := newClient(d1, o1), newClient(d2, o2)
	ctx := leasecheck.Context(t, 20*time.Second)

	// 1. acquire; 2. contend.
	la, err := c1.TryLock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.TryLock(ctx, "a"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	// 3. wait: c2's plain Lock tries, joins the queue, tries again (both
	// applied as busy), then c1 releases and the third attempt wins. (The
	// fair path's events: TestObserverFairWait.)
	applied := make(chan struct{}, 8)
	d2.SetFaultAfter(func(_ context.Context, op string) error {
		if op == memdriver.OpAcquire {
			applied <- struct{}{}
		}
		return nil
	})
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := c2.Lock(ctx, "a", dlock.WithTTL(900*time.Millisecond), dlock.WithoutFIFO())
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for range 2 {
		select {
		case <-applied:
		case <-ctx.Done():
			t.Fatal("c2's attempts never reached the store")
		}
	}
	if s := c2.Stats(); s.Waiters != 1 {
		t.Fatalf("c2 Stats while waiting: %+v", s)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	d2.SetFaultAfter(nil)

	// 4. lose: the lock is broken; c2's first renewal (at TTL/3 = 300 ms)
	// finds it not ours.
	if _, ok, err := c1.ForceRelease(ctx, "a"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	leasecheck.WaitDone(t, l2, 5*time.Second)
	if err := l2.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease: %v", err)
	}

	// 5. a fixed lease passes its deadline.
	lb, err := c1.TryLock(ctx, "b", dlock.WithTTL(100*time.Millisecond), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	leasecheck.WaitDone(t, lb, 5*time.Second)
	if err := lb.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock after the deadline: %v", err)
	}

	// 6. renewal failure: the first renewal fails, the second succeeds, any
	// later one hangs until Close aborts it (so it is never answered).
	boom := errors.New("boom")
	var renews atomic.Int32
	d1.SetFault(func(ctx context.Context, op string) error {
		if op != memdriver.OpRenew {
			return nil
		}
		switch renews.Add(1) {
		case 1:
			return boom
		case 2:
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	})
	if _, err := c1.TryLock(ctx, "c", dlock.WithTTL(600*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	o1.await(t, 5*time.Second, "two renewals of c", func() bool { return len(o1.renew) == 2 })
	// 7. close.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}

	// Close delivered what was queued: the counts are final.
	o1.mu.Lock()
	defer o1.mu.Unlock()
	o2.mu.Lock()
	defer o2.mu.Unlock()
	wantAcq := func(name string, evs []dlock.AcquireEvent, want ...string) {
		t.Helper()
		if len(evs) != len(want) {
			t.Fatalf("%s: %d acquire events %+v, want %v", name, len(evs), evs, want)
		}
		for i, e := range evs {
			if e.Result != want[i] || e.Primitive != "lock" || e.Ctx == nil {
				t.Errorf("%s acquire %d: %+v, want result %s", name, i, e, want[i])
			}
		}
	}
	wantAcq("c1", o1.acq, dlock.ResultAcquired, dlock.ResultAcquired, dlock.ResultAcquired)
	wantAcq("c2", o2.acq, dlock.ResultBusy, dlock.ResultAcquired)
	for i, want := range []int{1, 1, 1} {
		if o1.acq[i].Attempts != want || o1.acq[i].Token == 0 {
			t.Errorf("c1 acquire %d: attempts %d token %d", i, o1.acq[i].Attempts, o1.acq[i].Token)
		}
	}
	if a := o2.acq; a[0].Attempts != 1 || !errors.Is(a[0].Err, dlock.ErrNotAcquired) || a[1].Attempts != 3 || a[1].Token != l2.Token() {
		t.Errorf("c2 acquisitions: %+v", a)
	}
	if w := o2.acq[1].Wait; w <= 0 {
		t.Errorf("c2's Lock waited %v", w)
	}
	if r := o1.rel; len(r) != 2 || r[0].Result != dlock.ResultReleased || r[0].Key != "a" || r[0].Held <= 0 || !r[0].WasHeld ||
		r[1].Result != dlock.ResultNotHeld || r[1].Key != "b" || r[1].WasHeld {
		t.Errorf("c1 releases: %+v", r)
	}
	if r := o2.rel; len(r) != 1 || r[0].Result != dlock.ResultNotHeld || r[0].WasHeld {
		t.Errorf("c2 releases: %+v", r)
	}
	if l := o1.lost; len(l) != 2 || l[0].Key != "b" || l[0].Reason != dlock.LostDeadline || l[0].Held < 90*time.Millisecond ||
		l[1].Key != "c" || l[1].Reason != dlock.LostClosed {
		t.Errorf("c1 losses: %+v", l)
	}
	if l := o2.lost; len(l) != 1 || l[0].Reason != dlock.LostNotHeld || l[0].Token != l2.Token() {
		t.Errorf("c2 losses: %+v", l)
	}
	if r := o1.renew; len(r) != 2 || !errors.Is(r[0].Err, boom) || r[0].Leases != 1 || r[1].Err != nil || r[1].NotHeld != 0 {
		t.Errorf("c1 renewals: %+v", r)
	}
	if r := o2.renew; len(r) != 1 || r[0].Err != nil || r[0].Leases != 1 || r[0].NotHeld != 1 {
		t.Errorf("c2 renewals: %+v", r)
	}
	if b := o1.backend; len(b) != 1 || b[0].Op != "renew" || !errors.Is(b[0].Err, boom) {
		t.Errorf("c1 backend errors: %+v", b)
	}
	if len(o2.backend) != 0 || len(o1.wait) != 0 {
		t.Errorf("c2 backend errors %+v, c1 waits %+v", o2.backend, o1.wait)
	}
	if w := o2.wait; len(w) != 2 || !w[0].Started || w[0].Depth != 1 || w[0].Waiters != 1 || w[1].Started || w[1].Depth != 0 || w[1].Waiters != 0 {
		t.Errorf("c2 waits: %+v", w)
	}
	want1 := dlock.Stats{Acquired: 3, Released: 1, Lost: 1, RenewFailures: 1, BackendErrors: 1}
	want2 := dlock.Stats{Acquired: 1, Lost: 1}
	if s := c1.Stats(); s != want1 {
		t.Errorf("c1 Stats %+v, want %+v", s, want1)
	}
	if s := c2.Stats(); s != want2 {
		t.Errorf("c2 Stats %+v, want %+v", s, want2)
	}
}

// blockingObserver blocks in every call until release is closed, like an
// exporter stuck on a dead network.
type blockingObserver struct {
	dlock.BaseObserver
	release chan struct{}
	calls   atomic.Int64
}

func (b *blockingObserver) Acquire(dlock.AcquireEvent) { b.calls.Add(1); <-b.release }

// An Observer that blocks delays neither Lock, Unlock, nor the end of a
// lease at its deadline; events beyond the queue are dropped and counted.
func TestBlockingObserverDelaysNothing(t *testing.T) {
	obs := &blockingObserver{release: make(chan struct{})}
	t.Cleanup(func() { close(obs.release) }) // after Close (cleanups run last first)
	c, err := dlock.New(memdriver.New(), dlock.WithObserver(obs), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := leasecheck.Context(t, 20*time.Second)

	l, err := c.TryLock(ctx, "fixed", dlock.WithTTL(100*time.Millisecond), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	closedAt := make(chan time.Time, 1)
	go func() { <-l.Done(); closedAt <- time.Now() }()
	// Fill the queue behind the stuck observer (2 events per cycle) while
	// the fixed lease runs out.
	for range 20_000 {
		x, err := c.TryLock(ctx, "busy-loop")
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var at time.Time
	select {
	case at = <-closedAt:
	case <-time.After(5 * time.Second):
		t.Fatal("Done never closed")
	}
	if late := at.Sub(l.Deadline()); late > 50*time.Millisecond {
		t.Errorf("Done closed %v after the deadline, with the observer blocked", late)
	}
	if !errors.Is(l.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err %v", l.Err())
	}
	s := c.Stats()
	if s.ObserverDropped == 0 || s.Acquired != 20_001 || s.Released != 20_000 || s.Lost != 1 {
		t.Errorf("Stats %+v", s)
	}
	if n := obs.calls.Load(); n != 1 {
		t.Errorf("observer entered %d times, want 1 (it is still blocked in the first)", n)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with a blocked observer", d)
	}
}

func TestWithObserverRefusesNil(t *testing.T) {
	if _, err := dlock.New(memdriver.New(), dlock.WithObserver(nil)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("nil observer: %v", err)
	}
}

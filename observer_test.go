package dlock_test

import (
	"context"
	"errors"
	"fmt"
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

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func observedClient(t *testing.T, d *memdriver.Driver, o dlock.Observer) *dlock.Client {
	t.Helper()
	c, err := dlock.New(d, dlock.WithObserver(o), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
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

// A lease whose end Err noticed (its deadline passed) ends once in the
// events, also when Close comes later, and is no longer counted in
// Stats.Held. Before, Close gave it a second end (Lost "closed"), which
// took the held-leases gauges of the metrics packages to -1, and Stats
// counted it held until the renewal loop woke.
func TestLeaseEndedByItsDeadlineEndsOnce(t *testing.T) {
	for range 20 { // the race with the renewal loop is won by Err most times
		o := newRecorder()
		c := observedClient(t, memdriver.New(), o)
		ctx := leasecheck.Context(t, 10*time.Second)
		l, err := c.TryLock(ctx, "fixed", dlock.WithTTL(50*time.Millisecond), dlock.WithoutWatchdog())
		if err != nil {
			t.Fatal(err)
		}
		for l.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if held := c.Stats().Held; held != 0 {
			t.Fatalf("Stats.Held %d after the only lease reported itself lost, want 0", held)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		o.mu.Lock()
		lost, rel := o.lost, o.rel
		o.mu.Unlock()
		if len(lost) != 1 || lost[0].Reason != dlock.LostDeadline || len(rel) != 0 {
			t.Fatalf("ends of one lease: lost %+v, releases %+v; want one Lost (deadline)", lost, rel)
		}
	}
}

// Leases unlocked while Close runs end once each in the events: a Release
// with WasHeld, or a Lost (closed), never both. Before, 109 of 200 got
// both in a typical run.
func TestLeasesUnlockedDuringCloseEndOnce(t *testing.T) {
	const n = 200
	o := newRecorder()
	c := observedClient(t, memdriver.New(), o)
	ctx := leasecheck.Context(t, 20*time.Second)
	leases := make([]*dlock.Lease, n)
	for i := range leases {
		l, err := c.TryLock(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, l := range leases {
		wg.Go(func() { <-start; _ = l.Unlock(ctx) })
	}
	close(start)
	_ = c.Close()
	wg.Wait()
	ends := map[string]int{}
	o.mu.Lock()
	for _, e := range o.rel {
		if e.WasHeld {
			ends[e.Key]++
		}
	}
	for _, e := range o.lost {
		ends[e.Key]++
	}
	o.mu.Unlock()
	for i := range n {
		if k := fmt.Sprintf("k%d", i); ends[k] != 1 {
			t.Errorf("%s ended %d times in the events, want once", k, ends[k])
		}
	}
}

// A fair lock handed over after a wait is held, in the events, from the
// grant: its hold time does not count the wait. Before, it counted from
// its waiter place's last renewal, up to TTL/3 of the wait.
func TestFairHoldTimeStartsAtTheGrant(t *testing.T) {
	store := memdriver.New()
	o := newRecorder()
	holder := observedClient(t, store, newRecorder())
	waiter := observedClient(t, store.Connect(), o)
	ctx := leasecheck.Context(t, 20*time.Second)
	const ttl = 3 * time.Second
	h, err := holder.Lock(ctx, "fair", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := waiter.Lock(ctx, "fair", dlock.WithTTL(ttl))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	o.await(t, 5*time.Second, "the waiter's wait event", func() bool { return len(o.wait) > 0 })
	time.Sleep(700 * time.Millisecond) // a wait long enough to tell apart from the hold below
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	granted := time.Now()
	time.Sleep(100 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	heldFor := time.Since(granted)
	o.await(t, 5*time.Second, "the release event", func() bool { return len(o.rel) > 0 })
	o.mu.Lock()
	rel := o.rel[0]
	o.mu.Unlock()
	if rel.Held < 100*time.Millisecond || rel.Held > heldFor+300*time.Millisecond {
		t.Errorf("ReleaseEvent.Held %v, want the hold from the grant (at least 100ms, at most %v): the wait was counted",
			rel.Held, heldFor.Round(time.Millisecond))
	}
}

// One failed release call of a multi-lock is one store failure, in the
// events and in Stats, as a failed renewal batch or multi-lock acquisition
// is. Before, it counted once per lock.
func TestGroupReleaseFailureCountsOnce(t *testing.T) {
	d := memdriver.New()
	o := newRecorder()
	c := observedClient(t, d, o)
	ctx := leasecheck.Context(t, 10*time.Second)
	m, err := c.TryLockAll(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	// Only the first release call fails: a failed Unlock hands its locks
	// to the background release, whose own failure would be a second,
	// real store failure.
	boom := errors.New("store down")
	var releases atomic.Int32
	d.SetFault(func(_ context.Context, op string) error {
		if op == memdriver.OpRelease && releases.Add(1) == 1 {
			return boom
		}
		return nil
	})
	if err := m.Unlock(ctx); !errors.Is(err, boom) {
		t.Fatalf("Unlock with the store failing releases: %v", err)
	}
	if n := c.Stats().BackendErrors; n != 1 {
		t.Errorf("Stats.BackendErrors %d after one failed release call, want 1", n)
	}
	// Close delivers every event still queued: the backend event is pushed
	// after the release events and may come in a later batch than they do.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	rel, backend := len(o.rel), o.backend
	o.mu.Unlock()
	if rel != 3 {
		t.Errorf("%d release events, want 3", rel)
	}
	if len(backend) != 1 || backend[0].Op != "release" || !errors.Is(backend[0].Err, boom) {
		t.Errorf("BackendError events %+v, want one for the release call", backend)
	}
}

// WaitEvent.Depth counts every waiter of the Client for the key, the fair
// and the plain (WithoutFIFO) ones together. Before, each kind counted
// only its own.
func TestWaitDepthCountsFairAndPlainWaiters(t *testing.T) {
	store := memdriver.New()
	holder := observedClient(t, store, newRecorder())
	o := newRecorder()
	c := observedClient(t, store.Connect(), o)
	ctx := leasecheck.Context(t, 10*time.Second)
	if _, err := holder.Lock(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer giveUp()
	for i, opts := range [][]dlock.LockOption{nil, nil, {dlock.WithoutFIFO()}} {
		wg.Go(func() { _, _ = c.Lock(wctx, "k", opts...) })
		o.await(t, 5*time.Second, fmt.Sprintf("waiter %d's wait event", i+1), func() bool { return len(o.wait) == i+1 })
	}
	o.mu.Lock()
	last := o.wait[2]
	o.mu.Unlock()
	if !last.Started || last.Depth != 3 {
		t.Errorf("the third waiter's event %+v, want Depth 3 (two fair waiters and a plain one)", last)
	}
}

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

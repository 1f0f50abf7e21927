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

func observedClient(t *testing.T, d *memdriver.Driver, o dlock.Observer) *dlock.Client {
	t.Helper()
	c, err := dlock.New(d, dlock.WithObserver(o), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
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

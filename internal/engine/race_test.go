package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// Interleavings found by a concurrency review, each pinned by a hook at
// the point where the other side must run.

// hookCtx runs hook the first time Err is called: Release checks its
// context after it has decided what to do with the hold.
type hookCtx struct {
	context.Context
	once sync.Once
	hook func()
}

func (c *hookCtx) Err() error { c.once.Do(c.hook); return c.Context.Err() }

// A Release that overlaps Close must not leave the lock held: before the
// fix, Release untracked the hold, Close ran through without it, and
// Release then answered ErrClosed as if Close had released it.
func TestReleaseRacingCloseLeavesNothingHeld(t *testing.T) {
	for _, done := range []bool{false, true} {
		drv := memdriver.New()
		e, err := New(Config{Driver: drv, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, true))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		closed := make(chan struct{})
		hc := &hookCtx{Context: ctx, hook: func() {
			go func() { _ = e.Close(); close(closed) }()
			// Let Close get as far as it can without this call: past taking
			// the tracked holds, to where it stops new ops.
			eventually(t, 5*time.Second, "Close stops new ops", func() bool {
				e.opMu.Lock()
				defer e.opMu.Unlock()
				return e.opStopped
			})
			if done {
				cancel()
			}
		}}
		_ = e.Release(hc, h)
		<-closed
		cancel()
		if held(t, drv, "k") {
			t.Fatalf("ctx done %v: the lock is still held after Release and Close returned", done)
		}
	}
}

// A renewal answered after Err reported the hold lost must not revive it:
// the clock passes the deadline between apply's reading of it and its
// lock, and a user's Err ends the hold in that window.
func TestRenewalDoesNotReviveAHoldErrEnded(t *testing.T) {
	drv := memdriver.New()
	var off atomic.Int64
	var armed atomic.Bool
	var target atomic.Pointer[Hold]
	now := func() time.Time {
		v := time.Now().Add(time.Duration(off.Load()))
		if armed.CompareAndSwap(true, false) {
			h := target.Load()
			off.Add(int64(h.Deadline().Sub(v)))
			if !errors.Is(h.Err(), ErrLost) {
				panic("Err did not report the hold lost at its deadline")
			}
		}
		return v
	}
	e := newTestEngine(t, drv, func(c *Config) { c.Now = now })
	entered, open := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var renewals atomic.Int32
	drv.SetFault(func(_ context.Context, op string) error {
		if op == memdriver.OpRenew {
			renewals.Add(1)
			once.Do(func() { close(entered); <-open })
		}
		return nil
	})
	const ttl = 300 * time.Millisecond
	h, err := e.Acquire(context.Background(), lockReq("k", ttl, false, true))
	if err != nil {
		t.Fatal(err)
	}
	target.Store(h)
	<-entered // the first renewal is in flight; nothing else reads the clock
	armed.Store(true)
	close(open) // apply reads the clock next
	<-h.Done()
	eventually(t, 5*ttl, "the lost hold's key released", func() bool { return !held(t, drv, "k") })
	if n := renewals.Load(); n > 2 {
		t.Fatalf("%d renewals of a hold that reported itself lost", n)
	}
}

// Close's own releases are not dropped by the bound of the background
// queue when a call Close aborts adds its clean-up release afterwards.
func TestCloseReleasesSurviveLateAdds(t *testing.T) {
	drv := memdriver.New()
	e, err := New(Config{Driver: drv, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const n = maxQueuedReleases + 100
	for i := range n {
		if _, err := e.Acquire(context.Background(), lockReq(keyN(i), time.Minute, false, false)); err != nil {
			t.Fatal(err)
		}
	}
	g := newGate(memdriver.OpAcquire)
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpAcquire {
			g.entered <- struct{}{}
			<-ctx.Done() // stuck until Close aborts it; its clean-up then adds a release
		}
		return nil
	})
	inflight := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), lockReq("other", time.Minute, false, false))
		inflight <- err
	}()
	<-g.entered
	_ = e.Close()
	<-inflight
	drv.SetFault(nil)
	for i := range n {
		if held(t, drv, keyN(i)) {
			t.Fatalf("%s, one of Close's leases, is still held", keyN(i))
		}
	}
}

// notifyHook calls after once each release notification was delivered.
type notifyHook struct {
	driver.Driver
	after atomic.Pointer[func()]
}

func (d *notifyHook) Watch(f func(string)) (driver.Watcher, error) {
	return d.Driver.Watch(func(k string) {
		f(k)
		if p := d.after.Swap(nil); p != nil {
			(*p)()
		}
	})
}

// A waiter that took a release notification and then gave up (its ctx
// ended) passes the turn on: the next waiter must not sleep out the
// holder's TTL while the lock is free.
func TestConsumedWakeUpIsPassedOn(t *testing.T) {
	mem := memdriver.New()
	hd := &notifyHook{Driver: mem}
	e := newTestEngine(t, hd)
	other := newTestEngine(t, mem.Connect())
	h, err := other.Acquire(context.Background(), lockReq("k", time.Minute, false, true))
	if err != nil {
		t.Fatal(err)
	}
	waiters := func() int {
		e.waits.mu.Lock()
		defer e.waits.mu.Unlock()
		if q := e.waits.queues["k"]; q != nil && q.subscribed {
			return len(q.waiters)
		}
		return 0
	}
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	first := make(chan error, 1)
	go func() { _, err := e.Acquire(ctx1, lockReq("k", time.Second, true, true)); first <- err }()
	eventually(t, 5*time.Second, "first waiter queued", func() bool { return waiters() == 1 })
	second := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h2, err := e.Acquire(ctx, lockReq("k", time.Second, true, true))
		if h2 != nil {
			_ = e.Release(context.Background(), h2)
		}
		second <- err
	}()
	eventually(t, 5*time.Second, "second waiter queued", func() bool { return waiters() == 2 })
	f := func() { cancel1() } // the first waiter's ctx ends as its wake-up lands
	hd.after.Store(&f)
	start := time.Now()
	if err := other.Release(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	<-first
	if err := <-second; err != nil {
		t.Fatalf("second waiter: %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("the second waiter took the free lock %v after its release (the holder's TTL is a minute)", took)
	}
}

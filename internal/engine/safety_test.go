package engine

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/memdriver"
)

// Regression tests for the safety and liveness findings of the engine
// review. Each names the finding it covers.

// stubborn is a driver that, like go-redis, does not abort a call when its
// context ends.
type stubborn struct{ driver.Driver }

func (s stubborn) Capabilities() driver.Capabilities {
	c := s.Driver.Capabilities()
	c.ContextAware = false
	return c
}

// gate blocks the operations named op until opened, ignoring their
// context, as a client without context support on a stalled store does.
type gate struct {
	op      string
	entered chan struct{}
	open    chan struct{}
	hits    atomic.Int32
}

func newGate(op string) *gate {
	return &gate{op: op, entered: make(chan struct{}, 1024), open: make(chan struct{})}
}

func (g *gate) fault(_ context.Context, op string) error {
	if op != g.op {
		return nil
	}
	g.hits.Add(1)
	g.entered <- struct{}{}
	<-g.open
	return nil
}

// Finding 3: a lease must not report itself held past its validity
// deadline when the renewal loop has not run. The engine's clock jumps past
// the deadline; the loop sleeps on a real timer and has not woken, yet Err
// and Context().Err() report the loss at once.
func TestErrReportsLossAtDeadlineWithoutTheLoop(t *testing.T) {
	clk := newFakeClock()
	e := newTestEngine(t, nil, func(c *Config) { c.Now = clk.now })
	h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, false))
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute - e.drift(time.Minute) - time.Nanosecond)
	if err := h.Err(); err != nil {
		t.Fatalf("Err() = %v a nanosecond before the deadline", err)
	}
	clk.advance(time.Nanosecond)
	if err := h.Context().Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Context().Err() = %v at the deadline, want context.Canceled", err)
	}
	if err := h.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err() = %v at the deadline, want ErrLost", err)
	}
	if cause := context.Cause(h.Context()); !errors.Is(cause, ErrLost) {
		t.Fatalf("context.Cause = %v, want ErrLost", cause)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Err reported the loss but Done is still open")
	}
}

// Finding 3: a log handler that blocks froze expiry completely. Renewals
// fail (so the engine logs), the handler never returns, and the lease must
// still end at its deadline.
func TestBlockingLoggerDoesNotDelayExpiry(t *testing.T) {
	drv := memdriver.New()
	down := errors.New("store unreachable")
	drv.SetFault(func(_ context.Context, op string) error {
		if op == "renew" {
			return down
		}
		return nil
	})
	bh := probe.NewBlocking()
	defer close(bh.Release)
	e := newTestEngine(t, drv, func(c *Config) { c.Logger = slog.New(bh) })
	const ttl = 150 * time.Millisecond
	h, err := e.Acquire(context.Background(), lockReq("k", ttl, false, true))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	case <-time.After(10 * ttl):
		t.Fatalf("lease still open %v after acquisition with every renewal failing and the logger blocked", 10*ttl)
	}
	if !errors.Is(h.Err(), ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", h.Err())
	}
}

// Finding 2: Close must end leases at once, not after renewals in flight
// against a slow store have returned.
func TestCloseEndsLeasesBeforeWaitingForRenewals(t *testing.T) {
	drv := memdriver.New()
	g := newGate("renew")
	drv.SetFault(g.fault)
	e := newTestEngine(t, drv)
	// Long enough that the lease cannot reach its deadline (and end as
	// lost) before Close ends it, however loaded the machine.
	const ttl = 600 * time.Millisecond
	h, err := e.Acquire(context.Background(), lockReq("k", ttl, false, true))
	if err != nil {
		t.Fatal(err)
	}
	<-g.entered // a renewal is in flight and stuck
	closed := make(chan struct{})
	go func() { _ = e.Close(); close(closed) }()
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease still open while Close waits for a stuck renewal")
	}
	if !errors.Is(h.Err(), ErrClosed) {
		t.Fatalf("Err() = %v, want ErrClosed", h.Err())
	}
	select {
	case <-closed:
		t.Fatal("Close returned before the renewal in flight did")
	default:
	}
	close(g.open)
	<-closed
}

// Finding 4: an acquisition in flight when Close is called must not leave
// the key held by nobody: Close waits for it and releases what it took,
// before the application closes the store client.
func TestCloseReleasesAnAcquisitionInFlight(t *testing.T) {
	drv := memdriver.New()
	g := newGate("acquire")
	drv.SetFault(g.fault)
	e, err := New(Config{Driver: drv, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), lockReq("k", time.Minute, true, true))
		locked <- err
	}()
	<-g.entered
	closed := make(chan struct{})
	go func() { _ = e.Close(); close(closed) }()
	eventually(t, 5*time.Second, "Close started", e.isClosed)
	close(g.open) // the store now takes the lock for the acquisition
	<-closed
	drv.SetFault(nil)
	if held(t, drv, "k") {
		t.Fatal("the key is held by nobody after Close returned")
	}
	if err := <-locked; !errors.Is(err, ErrClosed) {
		t.Fatalf("Lock = %v, want ErrClosed", err)
	}
}

// Finding 5: ctx must bound a call whatever the driver's client honours.
// A driver that ignores ctx and takes 1 s: the call returns at ctx's end,
// and the lock the late call took is released, not left for its TTL.
func TestContextBoundsCallsOfStubbornDrivers(t *testing.T) {
	mem := memdriver.New()
	g := newGate("acquire")
	mem.SetFault(g.fault)
	e := newTestEngine(t, stubborn{mem})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Acquire(ctx, lockReq("k", time.Minute, true, true))
		errc <- err
	}()
	<-g.entered
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return when its ctx ended")
	}
	close(g.open) // the abandoned call now completes and takes the lock
	eventually(t, 5*time.Second, "the abandoned acquisition released", func() bool {
		return g.hits.Load() == 1 && !held(t, mem, "k")
	})
}

// Finding 7: Unlock with a context that is already done ends the lease
// and still frees the key, in the background, instead of leaving it held
// for its TTL.
func TestUnlockWithDoneContextReleasesInBackground(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, true))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Release(ctx, h); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release = %v, want context.Canceled", err)
	}
	if !errors.Is(h.Err(), ErrReleased) {
		t.Fatalf("Err() = %v, want ErrReleased", h.Err())
	}
	eventually(t, 5*time.Second, "key freed", func() bool { return !held(t, drv, "k") })
	// Unlocking again with a live context gives the definitive answer.
	if err := e.Release(context.Background(), h); err != nil {
		t.Fatalf("second Release = %v, want nil (released in the background)", err)
	}
}

// Finding 8: best-effort releases are batched by one goroutine, not one
// goroutine each: Close with many leases, and failed acquisitions during an
// outage, must not multiply goroutines.
func TestBackgroundReleasesAreBatched(t *testing.T) {
	drv := memdriver.New()
	e, err := New(Config{Driver: drv, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// More than the background queue holds: Close's releases are not bounded
	// by it.
	const n = maxQueuedReleases + 1000
	for i := range n {
		if _, err := e.Acquire(context.Background(), lockReq(keyN(i), time.Minute, false, true)); err != nil {
			t.Fatal(err)
		}
	}
	var closeErr error
	before, peak := probe.PeakGoroutines(func() { closeErr = e.Close() })
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	if peak > before+10 {
		t.Fatalf("Close with %d leases peaked at %d goroutines (%d before)", n, peak, before)
	}
	for i := range n {
		if held(t, drv, keyN(i)) {
			t.Fatalf("%s still held after Close", keyN(i))
		}
	}
}

func TestFailedAcquisitionsDoNotLeaveGoroutines(t *testing.T) {
	drv := memdriver.New()
	down := errors.New("store unreachable")
	release := make(chan struct{})
	defer close(release)
	drv.SetFault(func(ctx context.Context, op string) error {
		if op == "release" {
			<-release // the store hangs on releases
		}
		return down
	})
	e := newTestEngine(t, drv)
	before := runtime.NumGoroutine()
	for i := range 1000 {
		if _, err := e.Acquire(context.Background(), lockReq(keyN(i), time.Minute, false, true)); !errors.Is(err, ErrBackend) {
			t.Fatalf("TryAcquire = %v, want ErrBackend", err)
		}
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Fatalf("%d goroutines after 1000 failed acquisitions, %d before", n, before)
	}
}

// Finding 11: a busy answer with no time left (the key is in its last
// millisecond) must be retried at once, not after a fallback second.
func TestWaiterRetriesPromptlyWhenTheLockIsAboutToExpire(t *testing.T) {
	mem := memdriver.New()
	e := newTestEngine(t, &expiringNow{Driver: mem})
	start := time.Now()
	h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, true, true))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("Acquire took %v after a busy answer with 0 left", took)
	}
	_ = e.Release(context.Background(), h)
}

// expiringNow answers the first attempt "busy, expiring now", as Redis does
// for a key in its last millisecond.
type expiringNow struct {
	driver.Driver
	answered atomic.Bool
}

func (d *expiringNow) Acquire(ctx context.Context, r driver.AcquireRequest) (driver.AcquireResult, error) {
	if d.answered.CompareAndSwap(false, true) {
		return driver.AcquireResult{RetryAfter: 0}, nil
	}
	return d.Driver.Acquire(ctx, r)
}

func keyN(i int) string { return "k" + strconv.Itoa(i) }

// Release right after the deadline, before the renewal loop has noticed,
// answers ErrNotHeld: the holder stopped holding the lock at the deadline.
func TestReleasePastDeadlineIsNotHeld(t *testing.T) {
	clk := newFakeClock()
	e := newTestEngine(t, nil, func(c *Config) { c.Now = clk.now })
	h, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, false))
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute - e.drift(time.Minute))
	if err := e.Release(context.Background(), h); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release at the deadline = %v, want ErrNotHeld", err)
	}
	if !errors.Is(h.Err(), ErrLost) {
		t.Fatalf("Err() = %v, want ErrLost", h.Err())
	}
}

// A nil context is bad input, but not after the answer is known.
func TestReleaseWithNilContext(t *testing.T) {
	drv := memdriver.New()
	e := newTestEngine(t, drv)
	ctx := context.Background()
	h, err := e.Acquire(ctx, lockReq("k", time.Minute, false, true))
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := e.Release(nil, h); !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("Release(nil) = %v, want ErrInvalid", err)
	}
	eventually(t, 5*time.Second, "key freed in the background", func() bool { return !held(t, drv, "k") })
	h2, err := e.Acquire(ctx, lockReq("k2", time.Minute, false, true))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx, h2); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := e.Release(nil, h2); err != nil {
		t.Fatalf("Release(nil) after a successful release = %v, want the same answer (nil)", err)
	}
}

// stuckWatch is a driver whose release subscriptions never complete and
// ignore their context, like a pub/sub connection on a stalled store.
type stuckWatch struct {
	stubborn
	open chan struct{}
}

func (d stuckWatch) Watch(f func(string)) (driver.Watcher, error) {
	w, err := d.stubborn.Watch(f)
	return stuckWatcher{w, d.open}, err
}

type stuckWatcher struct {
	driver.Watcher
	open chan struct{}
}

func (w stuckWatcher) Add(ctx context.Context, key string) error {
	<-w.open
	return w.Watcher.Add(ctx, key)
}

// Lock on a busy key must return at ctx's end even while its subscription
// to release notifications is stuck.
func TestWaitHonoursContextWhileSubscribing(t *testing.T) {
	mem := memdriver.New()
	open := make(chan struct{})
	e := newTestEngine(t, stuckWatch{stubborn{mem}, open})
	defer close(open) // before Close, which waits for the abandoned Add
	if _, err := e.Acquire(context.Background(), lockReq("k", time.Minute, false, true)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Acquire(ctx, lockReq("k", time.Minute, true, true))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Acquire with a 100ms context took %v", took)
	}
}

package drivertest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// testWatchRelease: a release of a followed key calls the callback with
// the key, and by then the lock is free.
func testWatchRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	k := e.key("lock")
	rec := e.recorder()
	w := e.watch(rec)
	e.add(w, k)

	e.releaseOne(e.waitedFor(k, ttl), driver.Released)
	if !rec.wait(k, 1) {
		t.Fatalf("release of a followed key: no notification within %v", e.wait)
	}
	// The notification came after the release: the lock is free (acquire
	// fails the test otherwise).
	e.releaseOne(e.waitedFor(k, ttl), driver.Released)
	if !rec.wait(k, 2) {
		t.Fatalf("second release of a followed key: no notification within %v", e.wait)
	}
}

// testWatchSlowCallback: a callback that blocks delays neither Release
// nor other callers, later notifications are delivered once it returns,
// and callbacks never run concurrently.
func testWatchSlowCallback(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	k := e.key("lock")
	rec := e.recorder()
	unblock := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(unblock) }) }
	// Two callbacks in progress at once is what a driver calling from one
	// goroutine never causes.
	var active atomic.Int32
	var overlapped atomic.Bool
	w, err := e.d.Watch(func(key string) {
		if active.Add(1) > 1 {
			overlapped.Store(true)
		}
		defer active.Add(-1)
		rec.onRelease(key)
		<-unblock
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() { free(); _ = w.Close() })
	e.add(w, k)

	const n = 5
	for i := range n {
		start := time.Now()
		e.releaseOne(e.waitedFor(k, ttl), driver.Released)
		if took := time.Since(start); took > e.wait {
			t.Fatalf("acquire and release %d with a blocked callback took %v", i+1, took)
		}
	}
	if !rec.wait(k, 1) {
		t.Fatalf("release of a followed key: no notification within %v", e.wait)
	}
	// While the first callback blocks, a driver that calls back from
	// several goroutines enters a second one as soon as it delivers the
	// next notification; one that calls from one goroutine never does.
	// Give deliveries a tenth of the wait to show it.
	for until := time.Now().Add(e.wait / 10); !overlapped.Load() && time.Now().Before(until); {
		time.Sleep(time.Millisecond)
	}
	free()
	if !rec.wait(k, n) {
		t.Fatalf("%d of %d notifications delivered after a slow callback returned", rec.count(k), n)
	}
	if overlapped.Load() {
		t.Error("callbacks of one Watcher ran concurrently")
	}
}

// testWatchForceRelease: a forced release wakes watchers too.
func testWatchForceRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	in := e.inspector()
	k := e.key("lock")
	rec := e.recorder()
	e.add(e.watch(rec), k)
	e.acquire(k, e.ttl(longTTL))
	if _, ok, err := in.ForceRelease(e.ctx, k); err != nil || !ok {
		t.Fatalf("ForceRelease of a held lock: ok %v, err %v", ok, err)
	}
	if !rec.wait(k, 1) {
		t.Fatalf("ForceRelease of a followed key: no notification within %v", e.wait)
	}
}

// testWatchRemove: after Remove, releases of the key are not delivered;
// keys never added are not delivered either.
//
// A notification may be in flight when Remove is called, so the test
// waits for the one it caused before removing, and after the later
// releases it waits for a sentinel key's notification, released last,
// before counting. A driver whose Remove takes effect asynchronously gets
// one more chance to settle: a key is added after the Remove, and Add
// returns only once its subscription is confirmed.
func testWatchRemove(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	k, sentinel := e.key("removed"), e.key("sentinel")
	unwatched := e.key("unwatched")
	rec := e.recorder()
	w := e.watch(rec)
	e.add(w, k)
	e.add(w, sentinel)

	e.releaseOne(e.waitedFor(k, ttl), driver.Released)
	if !rec.wait(k, 1) {
		t.Fatalf("release of a followed key: no notification within %v", e.wait)
	}
	if err := w.Remove(e.ctx, k); err != nil {
		t.Fatalf("Watcher.Remove(%q): %v", k, err)
	}
	e.add(w, e.key("barrier"))

	e.releaseOne(e.waitedFor(k, ttl), driver.Released)
	e.releaseOne(e.waitedFor(unwatched, ttl), driver.Released)
	e.releaseOne(e.waitedFor(sentinel, ttl), driver.Released)
	if !rec.wait(sentinel, 1) {
		t.Fatalf("release of a followed key: no notification within %v", e.wait)
	}
	if n := rec.count(k) - 1; n != 0 {
		t.Errorf("%d notifications for a release after Remove, want none", n)
	}
	if n := rec.count(unwatched); n != 0 {
		t.Errorf("%d notifications for a key never added, want none", n)
	}
}

// testWatchNil: a nil callback is an invalid argument.
func testWatchNil(t *testing.T, h Harness) {
	e := newEnv(t, h)
	w, err := e.d.Watch(nil)
	if w != nil {
		defer w.Close()
	}
	if !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Watch(nil) error = %v, want one matching driver.ErrInvalid", err)
	}
}

// testWatchClose: Close returns promptly, used or not, and the callback of
// a closed Watcher is not called again, while other Watchers still are.
func testWatchClose(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	closed, open := e.recorder(), e.recorder()
	w, err := e.d.Watch(closed.onRelease)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	e.add(w, k)
	e.add(e.watch(open), k)
	unused, err := e.d.Watch(func(string) {})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	e.closeWithin("Close of a Watcher following a key", w)
	e.closeWithin("Close of a Watcher never used", unused)

	e.releaseOne(e.waitedFor(k, e.ttl(longTTL)), driver.Released)
	if !open.wait(k, 1) {
		t.Fatalf("release of a key followed by an open Watcher: no notification within %v", e.wait)
	}
	// Watchers deliver independently, so the open one being first proves
	// nothing about the closed one: give it a moment to misbehave.
	if closed.waitUpTo(k, 1, closedGrace) {
		t.Errorf("callback of a closed Watcher called %d times", closed.count(k))
	}
}

// closedGrace is how long testWatchClose waits for a callback that must
// not come.
const closedGrace = 100 * time.Millisecond

func (e *env) closeWithin(what string, w driver.Watcher) {
	e.t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Close() }()
	select {
	case err := <-done:
		if err != nil {
			e.t.Errorf("%s: %v", what, err)
		}
	case <-time.After(e.wait):
		e.t.Errorf("%s did not return within %v", what, e.wait)
	}
}

package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

const (
	// longTTL is the TTL of locks that must not expire during a subtest.
	longTTL = 30 * time.Second
	// opTimeout bounds every call of a subtest together.
	opTimeout = 30 * time.Second
	// defaultTimeout is Harness.Timeout when it is zero.
	defaultTimeout = 5 * time.Second
	// maxKeyLen is dlock's limit on lock names (dlock.MaxKeyLen, repeated
	// so that the suite depends on package driver alone).
	maxKeyLen = 1024
)

// runID makes this process's lock names differ from those of earlier runs
// on the same store, whose locks may not have expired yet.
var runID = newID()[:8]

// env is one subtest's driver and helpers. Its helpers fail the subtest on
// errors, so the subtests read as the promises they check.
type env struct {
	t    *testing.T
	d    driver.Driver
	caps driver.Capabilities
	ctx  context.Context
	base string        // unique lock-name prefix of the subtest
	wait time.Duration // Harness.Timeout
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	d := h.New(t)
	if d == nil {
		t.Fatal("Harness.New returned nil")
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	caps := d.Capabilities()
	if caps.TTLUnit <= 0 || caps.MinTTL < caps.TTLUnit || caps.MaxBatch <= 0 {
		// Other subtests would divide by or loop on these.
		t.Fatalf("unusable Capabilities %+v", caps)
	}
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	wait := h.Timeout
	if wait <= 0 {
		wait = defaultTimeout
	}
	return &env{t: t, d: d, caps: caps, ctx: ctx, base: t.Name() + "@" + runID, wait: wait}
}

// key returns a lock name unique to the subtest and this run.
func (e *env) key(name string) string { return e.base + "/" + name }

// ttl rounds d up to what the driver accepts.
func (e *env) ttl(d time.Duration) time.Duration {
	d = max(d, e.caps.MinTTL)
	if r := d % e.caps.TTLUnit; r != 0 {
		d += e.caps.TTLUnit - r
	}
	return d
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// owner is what the suite's acquisitions claim to be.
func (e *env) owner() driver.Owner {
	return driver.Owner{Host: "drivertest", PID: os.Getpid(), Meta: e.t.Name()}
}

func (e *env) req(key, id string, ttl time.Duration) driver.AcquireRequest {
	return driver.AcquireRequest{Key: key, ID: id, TTL: ttl, Owner: e.owner(), Waiting: true}
}

// try makes one acquisition attempt and fails the subtest on error.
func (e *env) try(req driver.AcquireRequest) driver.AcquireResult {
	e.t.Helper()
	res, err := e.d.Acquire(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Acquire(%q, id %s): %v", req.Key, req.ID, err)
	}
	return res
}

// lease is an acquisition the subtest holds (or held).
type lease struct {
	key, id string
	token   uint64
}

// acquire takes key with a fresh ID and fails the subtest unless it gets
// the lock.
func (e *env) acquire(key string, ttl time.Duration) lease {
	e.t.Helper()
	id := newID()
	res := e.try(e.req(key, id, ttl))
	if !res.Acquired {
		e.t.Fatalf("Acquire(%q) of a free lock: not acquired (RetryAfter %v)", key, res.RetryAfter)
	}
	return lease{key, id, res.Token}
}

// waitedFor acquires key, as acquire does, and then has a waiter ask for
// it (a refused Acquire with Waiting set): the release of such a lease is
// one a driver must notify (driver.Driver.Release).
func (e *env) waitedFor(key string, ttl time.Duration) lease {
	e.t.Helper()
	l := e.acquire(key, ttl)
	if res := e.try(e.req(key, newID(), ttl)); res.Acquired {
		e.t.Fatalf("Acquire(%q) of a held lock by another id: acquired", key)
	}
	return l
}

// release sends one Release call and checks it answers every request.
func (e *env) release(reqs ...driver.ReleaseRequest) []driver.ReleaseResult {
	e.t.Helper()
	res, err := e.d.Release(e.ctx, reqs)
	if err != nil {
		e.t.Fatalf("Release of %d: %v", len(reqs), err)
	}
	if len(res) != len(reqs) {
		e.t.Fatalf("Release of %d requests returned %d results", len(reqs), len(res))
	}
	return res
}

// releaseOne releases l and checks the result.
func (e *env) releaseOne(l lease, want driver.ReleaseResult) {
	e.t.Helper()
	if got := e.release(driver.ReleaseRequest{Key: l.key, ID: l.id})[0]; got != want {
		e.t.Errorf("Release(%q) = %s, want %s", l.key, resultName(got), resultName(want))
	}
}

// renew renews reqs in chunks of MaxBatch, as the engine does.
func (e *env) renew(reqs []driver.RenewRequest) []bool {
	e.t.Helper()
	held := make([]bool, 0, len(reqs))
	for len(reqs) > 0 {
		n := min(len(reqs), e.caps.MaxBatch)
		h, err := e.d.Renew(e.ctx, reqs[:n])
		if err != nil {
			e.t.Fatalf("Renew of %d: %v", n, err)
		}
		if len(h) != n {
			e.t.Fatalf("Renew of %d requests returned %d results", n, len(h))
		}
		held = append(held, h...)
		reqs = reqs[n:]
	}
	return held
}

// held reports whether l is still held, by renewing it.
func (e *env) held(l lease, ttl time.Duration) bool {
	e.t.Helper()
	return e.renew([]driver.RenewRequest{{Key: l.key, ID: l.id, TTL: ttl}})[0]
}

// busy checks that a stranger cannot take key.
func (e *env) busy(key string) {
	e.t.Helper()
	if res := e.try(e.req(key, newID(), e.ttl(longTTL))); res.Acquired {
		e.t.Errorf("Acquire(%q) by a stranger while it is held: acquired (token %d)", key, res.Token)
	}
}

// inspector returns the driver's Inspector or skips the subtest.
func (e *env) inspector() driver.Inspector {
	e.t.Helper()
	in, ok := e.d.(driver.Inspector)
	if !ok {
		e.t.Skip("driver does not implement driver.Inspector")
	}
	return in
}

// eventually polls f every few milliseconds until it is true or bound has
// passed, and reports whether it became true.
func eventually(bound time.Duration, f func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// retryErr calls f until it returns nil or bound passes, for the first
// requests after a restart; it fails the subtest with the last error.
func (e *env) retryErr(bound time.Duration, what string, f func() error) {
	e.t.Helper()
	var err error
	if !eventually(bound, func() bool { err = f(); return err == nil }) {
		e.t.Fatalf("%s after restart: still failing after %v: %v", what, bound, err)
	}
}

func resultName(r driver.ReleaseResult) string {
	switch r {
	case driver.Released:
		return "Released"
	case driver.AlreadyReleased:
		return "AlreadyReleased"
	case driver.NotHeld:
		return "NotHeld"
	}
	return fmt.Sprintf("ReleaseResult(%d)", int(r))
}

// recorder is a Watch callback that records the keys it is called with.
// It never calls t: callbacks may come after the subtest ended.
type recorder struct {
	timeout time.Duration
	mu      sync.Mutex
	counts  map[string]int
	signal  chan struct{} // capacity 1
}

func (e *env) recorder() *recorder {
	return &recorder{timeout: e.wait, counts: make(map[string]int), signal: make(chan struct{}, 1)}
}

func (r *recorder) onRelease(key string) {
	r.mu.Lock()
	r.counts[key]++
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

// wait waits until key was notified n times in all, up to the timeout.
func (r *recorder) wait(key string, n int) bool { return r.waitUpTo(key, n, r.timeout) }

func (r *recorder) waitUpTo(key string, n int, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for r.count(key) < n {
		select {
		case <-r.signal:
		case <-timer.C:
			return r.count(key) >= n
		}
	}
	return true
}

// watch opens a Watcher closed at the end of the subtest.
func (e *env) watch(r *recorder) driver.Watcher {
	e.t.Helper()
	w, err := e.d.Watch(r.onRelease)
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	if w == nil {
		e.t.Fatal("Watch returned a nil Watcher and no error")
	}
	e.t.Cleanup(func() { _ = w.Close() })
	return w
}

func (e *env) add(w driver.Watcher, key string) {
	e.t.Helper()
	if err := w.Add(e.ctx, key); err != nil {
		e.t.Fatalf("Watcher.Add(%q): %v", key, err)
	}
}

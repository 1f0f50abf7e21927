package drivertest

import (
	"testing"

	"github.com/dlockio/dlock/driver"
)

// testRetryAcquire: the same request sent twice, as after a lost reply,
// is acquired both times with the same token, and is one acquisition.
func testRetryAcquire(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	req := e.req(k, newID(), ttl)
	first := e.try(req)
	if !first.Acquired {
		t.Fatalf("Acquire(%q) of a free lock: not acquired", k)
	}
	for _, waiting := range []bool{true, false} {
		req.Waiting = waiting
		if again := e.try(req); !again.Acquired || again.Token != first.Token {
			t.Errorf("repeated Acquire (Waiting %v): acquired %v, token %d; want acquired, token %d",
				waiting, again.Acquired, again.Token, first.Token)
		}
	}
	e.busy(k)
	e.releaseOne(lease{k, req.ID, first.Token}, driver.Released)
	if next := e.acquire(k, ttl); next.token <= first.Token {
		t.Errorf("token after release = %d, want greater than %d", next.token, first.Token)
	}
}

// testRetryRelease: a release sent twice is Released, then
// AlreadyReleased; sent again after someone else took the lock, it does
// not free their lock.
func testRetryRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	a := e.acquire(k, ttl)
	e.releaseOne(a, driver.Released)
	e.releaseOne(a, driver.AlreadyReleased)

	b := e.acquire(k, ttl)
	if got := e.release(driver.ReleaseRequest{Key: k, ID: a.id})[0]; got == driver.Released {
		t.Errorf("late retry of a release after another holder took the lock: %s", resultName(got))
	}
	if !e.held(b, ttl) {
		t.Error("new holder lost the lock to the previous holder's retried release")
	}
	e.busy(k)
}

// testRetryStranger: a release by an ID that does not hold the lock is
// NotHeld and changes nothing.
func testRetryStranger(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	a := e.acquire(k, ttl)
	if got := e.release(driver.ReleaseRequest{Key: k, ID: newID()})[0]; got != driver.NotHeld {
		t.Errorf("Release by a stranger = %s, want NotHeld", resultName(got))
	}
	e.busy(k)
	if !e.held(a, ttl) {
		t.Error("holder lost the lock to a stranger's release")
	}
	e.releaseOne(a, driver.Released)
	if got := e.release(driver.ReleaseRequest{Key: k, ID: newID()})[0]; got != driver.NotHeld {
		t.Errorf("Release of a free lock by a stranger = %s, want NotHeld", resultName(got))
	}
	if got := e.release(driver.ReleaseRequest{Key: e.key("never"), ID: newID()})[0]; got != driver.NotHeld {
		t.Errorf("Release of a never-held lock = %s, want NotHeld", resultName(got))
	}
}

// testReleaseBatch: one Release call answers each request on its own.
func testReleaseBatch(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	mine := e.acquire(e.key("mine"), ttl)
	theirs := e.acquire(e.key("theirs"), ttl)
	done := e.acquire(e.key("done"), ttl)
	e.releaseOne(done, driver.Released)

	reqs := []driver.ReleaseRequest{
		{Key: mine.key, ID: mine.id},
		{Key: theirs.key, ID: newID()},
		{Key: done.key, ID: done.id},
		{Key: e.key("never"), ID: newID()},
	}
	want := []driver.ReleaseResult{driver.Released, driver.NotHeld, driver.AlreadyReleased, driver.NotHeld}
	if e.caps.MaxBatch < len(reqs) {
		t.Skipf("MaxBatch %d is below the %d requests of this test", e.caps.MaxBatch, len(reqs))
	}
	for i, got := range e.release(reqs...) {
		if got != want[i] {
			t.Errorf("batched Release of %q (%d of %d): %s, want %s", reqs[i].Key, i+1, len(reqs), resultName(got), resultName(want[i]))
		}
	}
	if next := e.acquire(mine.key, ttl); next.token <= mine.token {
		t.Errorf("token after batched release = %d, want greater than %d", next.token, mine.token)
	}
	if !e.held(theirs, ttl) {
		t.Error("holder lost the lock to a stranger's request in a batch")
	}
	if got, err := e.d.Release(e.ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Release of an empty batch = %v, %v; want no results, no error", got, err)
	}
}

// testRetryAfterNextRelease: a release retried after the lock moved on —
// another holder took it and released it too, twice — is still
// AlreadyReleased, not NotHeld: the retry is of a release that happened
// (Unlock's retry after a lost reply, on a busy or fair lock).
func testRetryAfterNextRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	a := e.acquire(k, ttl)
	e.releaseOne(a, driver.Released)
	for range 2 {
		e.releaseOne(e.acquire(k, ttl), driver.Released)
	}
	if got := e.release(driver.ReleaseRequest{Key: k, ID: a.id})[0]; got != driver.AlreadyReleased {
		t.Errorf("retry of a release after two later holders released: %s, want AlreadyReleased", resultName(got))
	}
}

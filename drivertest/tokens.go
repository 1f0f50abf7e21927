package drivertest

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// testTokensRelease: each holder after a release gets a greater token.
func testTokensRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	prev := e.acquire(k, ttl)
	for range 5 {
		e.releaseOne(prev, driver.Released)
		next := e.acquire(k, ttl)
		if next.token <= prev.token {
			t.Fatalf("token after release = %d, previous holder's %d: want greater", next.token, prev.token)
		}
		prev = next
	}
}

// testTokensExpiry: a lock becomes free once its TTL has run out, not
// before (less the ExpiryMargin), its next holder gets a greater token,
// and the expired holder can neither release nor renew it.
func testTokensExpiry(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	// Long enough that a driver expiring early (at half the TTL, say) is
	// caught even when the acquisition's reply is delayed by a loaded
	// machine: the lower bound below counts from before the request.
	ttl := e.ttl(400 * time.Millisecond)
	start := time.Now()
	a := e.acquire(k, ttl)

	var b driver.AcquireResult
	bReq := e.req(k, newID(), e.ttl(longTTL))
	badRetry := false
	if !eventually(20*ttl+e.wait, func() bool {
		b = e.try(bReq)
		if !b.Acquired && !badRetry && (b.RetryAfter < 0 || b.RetryAfter > ttl) {
			badRetry = true // once: this runs every few milliseconds
			t.Errorf("RetryAfter = %v while the lock expires, want in [0, %v]", b.RetryAfter, ttl)
		}
		return b.Acquired
	}) {
		t.Fatalf("lock with TTL %v still held after %v", ttl, time.Since(start))
	}
	if elapsed, least := time.Since(start), ttl-e.caps.ExpiryMargin; elapsed < least {
		t.Errorf("lock with TTL %v free after %v, want at least %v (TTL less ExpiryMargin)", ttl, elapsed, least)
	}
	if b.Token <= a.token {
		t.Errorf("token after expiry = %d, expired holder's %d: want greater", b.Token, a.token)
	}
	e.releaseOne(a, driver.NotHeld)
	if e.held(a, ttl) {
		t.Error("Renew by the expired holder: true, want false")
	}
	if !e.held(lease{k, bReq.ID, b.Token}, e.ttl(longTTL)) {
		t.Error("new holder lost the lock to the expired holder's release or renewal")
	}
}

// testTokensForceRelease: the holder after a forced release gets a greater
// token.
func testTokensForceRelease(t *testing.T, h Harness) {
	e := newEnv(t, h)
	in := e.inspector()
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	a := e.acquire(k, ttl)
	if _, ok, err := in.ForceRelease(e.ctx, k); err != nil || !ok {
		t.Fatalf("ForceRelease of a held lock: ok %v, err %v", ok, err)
	}
	if b := e.acquire(k, ttl); b.token <= a.token {
		t.Errorf("token after ForceRelease = %d, broken holder's %d: want greater", b.token, a.token)
	}
}

// testRestartEmpty: after the store lost everything, locks are free and
// their tokens still exceed every token issued before.
func testRestartEmpty(t *testing.T, h Harness) {
	if h.Restart == nil {
		t.Skip("Harness.Restart is nil")
	}
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	held := e.acquire(e.key("held"), ttl)
	freed := e.acquire(e.key("released"), ttl)
	e.releaseOne(freed, driver.Released)

	h.Restart(t, RestartEmpty)

	for _, before := range []lease{held, freed} {
		var res driver.AcquireResult
		e.retryErr(e.wait, "Acquire", func() (err error) {
			res, err = e.d.Acquire(e.ctx, e.req(before.key, newID(), ttl))
			return err
		})
		if !res.Acquired {
			t.Errorf("Acquire(%q) after an empty restart: not acquired", before.key)
			continue
		}
		if res.Token <= before.token {
			t.Errorf("Acquire(%q) after an empty restart: token %d, want greater than %d issued before",
				before.key, res.Token, before.token)
		}
	}
	e.releaseOne(held, driver.NotHeld)
}

// testRestartFromSnapshot: after the store went back to an older state,
// every lock's next token still exceeds all tokens issued for it, including
// those issued after the snapshot.
func testRestartFromSnapshot(t *testing.T, h Harness) {
	if h.Restart == nil || h.Snapshot == nil {
		t.Skip("Harness.Restart or Harness.Snapshot is nil")
	}
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	// history records, per key, every ID used (to clear locks the snapshot
	// brings back) and the greatest token issued.
	type history struct {
		ids []string
		max uint64
	}
	hist := map[string]*history{}
	take := func(name string) lease {
		l := e.acquire(e.key(name), ttl)
		hh := hist[l.key]
		if hh == nil {
			hh = &history{}
			hist[l.key] = hh
		}
		hh.ids = append(hh.ids, l.id)
		hh.max = max(hh.max, l.token)
		return l
	}
	// Held across the snapshot; moved on after it; first taken after it.
	take("held")
	moved := take("moved")
	e.releaseOne(take("freed"), driver.Released)

	h.Snapshot(t)

	for range 3 {
		e.releaseOne(moved, driver.Released)
		moved = take("moved")
	}
	e.releaseOne(take("freed"), driver.Released)
	take("new")

	h.Restart(t, RestartFromSnapshot)

	for key, hh := range hist {
		// The snapshot may hold the lock for an ID of ours: release it.
		reqs := make([]driver.ReleaseRequest, len(hh.ids))
		for i, id := range hh.ids {
			reqs[i] = driver.ReleaseRequest{Key: key, ID: id}
		}
		for len(reqs) > 0 {
			n := min(len(reqs), e.caps.MaxBatch)
			e.retryErr(e.wait, "Release", func() error { _, err := e.d.Release(e.ctx, reqs[:n]); return err })
			reqs = reqs[n:]
		}
		res := e.try(e.req(key, newID(), ttl))
		if !res.Acquired {
			t.Errorf("Acquire(%q) after restoring a snapshot and releasing our locks: not acquired", key)
			continue
		}
		if res.Token <= hh.max {
			t.Errorf("Acquire(%q) after restoring a snapshot: token %d, want greater than %d issued before",
				key, res.Token, hh.max)
		}
	}
}

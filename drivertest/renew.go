package drivertest

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// renewLeases is how many leases testRenewExtends renews: more than
// MaxBatch for most drivers, so that several full calls and a partial one
// are made.
const renewLeases = 2500

// testRenewExtends: renewed in MaxBatch chunks, every one of many held
// leases is reported held, and is still held after its original TTL has
// passed.
//
// The leases are taken with a short TTL, so that the test can wait it out.
// On a slow store the first may expire before the renewal reaches them:
// a lease counts as surely held only if its renewal chunk was answered
// before its TTL could have run out; the others may be lost and are left
// out of the later checks.
func testRenewExtends(t *testing.T, h Harness) {
	e := newEnv(t, h)
	short := e.ttl(time.Second)
	long := e.ttl(longTTL)
	leases := e.acquireMany(renewLeases, short)

	var kept []timedLease // renewed: the leases checked below
	for len(leases) > 0 {
		chunk := leases[:min(len(leases), e.caps.MaxBatch)]
		leases = leases[len(chunk):]
		held := e.renew(renewals(chunk, long))
		answered := time.Now()
		for i, l := range chunk {
			switch {
			case held[i]:
				kept = append(kept, l)
			case answered.Before(l.sent.Add(short - e.caps.ExpiryMargin)):
				t.Errorf("renewal of %q within its TTL: not held", l.key)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if len(kept) < renewLeases/2 {
		t.Skipf("only %d of %d leases still held when renewed: the store is too slow for this test", len(kept), renewLeases)
	}

	// Every lease would have expired by now had the renewal not extended
	// it. Sleeping is the point here: the test is about time passing.
	var last time.Time
	for _, l := range kept {
		if l.answered.After(last) {
			last = l.answered
		}
	}
	time.Sleep(time.Until(last.Add(short + short/10)))

	if lost := countFalse(e.renew(renewals(kept, long))); lost > 0 {
		t.Errorf("%d of %d renewed leases lost after their original TTL %v", lost, len(kept), short)
	}
	for _, i := range []int{0, len(kept) / 2, len(kept) - 1} {
		e.busy(kept[i].key)
	}
}

// timedLease is a lease with the times its acquisition was sent and
// answered, between which the store started its TTL.
type timedLease struct {
	lease
	sent, answered time.Time
}

// acquireMany takes n locks with ttl from a few goroutines, so that a
// store with a round trip of a few hundred microseconds takes them well
// within a second.
func (e *env) acquireMany(n int, ttl time.Duration) []timedLease {
	e.t.Helper()
	leases := make([]timedLease, n)
	var next atomic.Int64
	var mu sync.Mutex
	var failure error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				key, id := e.key(fmt.Sprintf("l%04d", i)), newID()
				sent := time.Now()
				res, err := e.d.Acquire(e.ctx, e.req(key, id, ttl))
				if err == nil && !res.Acquired {
					err = fmt.Errorf("Acquire(%q) of a free lock: not acquired", key)
				}
				if err != nil {
					mu.Lock()
					failure = cmp.Or(failure, err)
					mu.Unlock()
					return
				}
				leases[i] = timedLease{lease{key, id, res.Token}, sent, time.Now()}
			}
		})
	}
	wg.Wait()
	if failure != nil {
		e.t.Fatal(failure)
	}
	return leases
}

func renewals(leases []timedLease, ttl time.Duration) []driver.RenewRequest {
	reqs := make([]driver.RenewRequest, len(leases))
	for i, l := range leases {
		reqs[i] = driver.RenewRequest{Key: l.key, ID: l.id, TTL: ttl}
	}
	return reqs
}

func countFalse(held []bool) int {
	n := 0
	for _, h := range held {
		if !h {
			n++
		}
	}
	return n
}

// testRenewNotHeld: renewals of released, foreign and unknown leases are
// false and change nothing; a held one in the same call is true.
func testRenewNotHeld(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	mine := e.acquire(e.key("mine"), ttl)
	done := e.acquire(e.key("done"), ttl)
	e.releaseOne(done, driver.Released)
	theirs := e.acquire(e.key("theirs"), ttl)

	reqs := []driver.RenewRequest{
		{Key: done.key, ID: done.id, TTL: ttl},
		{Key: theirs.key, ID: newID(), TTL: ttl},
		{Key: e.key("never"), ID: newID(), TTL: ttl},
		{Key: mine.key, ID: mine.id, TTL: ttl},
	}
	want := []bool{false, false, false, true}
	if e.caps.MaxBatch < len(reqs) {
		t.Skipf("MaxBatch %d is below the %d requests of this test", e.caps.MaxBatch, len(reqs))
	}
	for i, got := range e.renew(reqs) {
		if got != want[i] {
			t.Errorf("Renew of %q (%d of %d) = %v, want %v", reqs[i].Key, i+1, len(reqs), got, want[i])
		}
	}
	// A renewal that failed must not have taken or revived anything.
	e.acquire(done.key, ttl)
	e.acquire(e.key("never"), ttl)
	if !e.held(theirs, ttl) {
		t.Error("holder lost the lock to a stranger's renewal")
	}
}

// testRenewEmpty: an empty batch is no error.
func testRenewEmpty(t *testing.T, h Harness) {
	e := newEnv(t, h)
	for _, reqs := range [][]driver.RenewRequest{nil, {}} {
		if held, err := e.d.Renew(e.ctx, reqs); err != nil || len(held) != 0 {
			t.Errorf("Renew(%#v) = %v, %v; want no results, no error", reqs, held, err)
		}
	}
}

package drivertest

import (
	"fmt"
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
func testRenewExtends(t *testing.T, h Harness) {
	e := newEnv(t, h)
	short := e.ttl(time.Second)
	long := e.ttl(longTTL)
	leases := make([]lease, renewLeases)
	start := time.Now()
	for i := range leases {
		leases[i] = e.acquire(e.key(fmt.Sprintf("l%04d", i)), short)
	}
	acquired := time.Now()
	if took := acquired.Sub(start); took > short/2 {
		t.Fatalf("acquiring %d leases took %v, more than half their TTL %v: the store is too slow for this test",
			len(leases), took, short)
	}
	reqs := make([]driver.RenewRequest, len(leases))
	for i, l := range leases {
		reqs[i] = driver.RenewRequest{Key: l.key, ID: l.id, TTL: long}
	}
	if lost := countFalse(e.renew(reqs)); lost > 0 {
		t.Fatalf("renewal of %d held leases: %d not held", len(reqs), lost)
	}

	// Every lease would have expired by now had the renewal not extended
	// it. Sleeping is the point here: the test is about time passing.
	time.Sleep(time.Until(acquired.Add(short + short/10)))

	if lost := countFalse(e.renew(reqs)); lost > 0 {
		t.Errorf("%d of %d renewed leases lost after their original TTL %v", lost, len(reqs), short)
	}
	for _, i := range []int{0, len(leases) / 2, len(leases) - 1} {
		e.busy(leases[i].key)
	}
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

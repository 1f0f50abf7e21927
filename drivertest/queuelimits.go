package drivertest

import (
	"errors"
	"testing"

	"github.com/dlockio/dlock/driver"
)

// enqueueErr sends req and returns the error Enqueue answered, failing the
// subtest if it granted or queued req instead.
func (e *qenv) enqueueErr(req driver.QueueRequest) error {
	e.t.Helper()
	res, err := e.q.Enqueue(e.ctx, req)
	if err == nil {
		e.t.Errorf("Enqueue(%q, %v, limit %d, max waiters %d): granted %v queued %v, want an error",
			req.Key, req.Mode, req.Limit, req.MaxWaiters, res.Granted, res.Queued)
	}
	return err
}

// waiterIDs returns the ids of key's waiters, in queue order.
func (e *qenv) waiterIDs(key string) []string {
	e.t.Helper()
	info, _, err := e.inspectQueue(key)
	if err != nil {
		e.t.Fatalf("InspectQueue(%q): %v", key, err)
	}
	ids := make([]string, 0, len(info.Waiters))
	for _, w := range info.Waiters {
		ids = append(ids, w.ID)
	}
	return ids
}

// testQueuePermitLimit: the name keeps the limit of its permits. While
// permits are held, or permit waiters wait, a request with another limit
// is refused with ErrLimitMismatch (also ErrInvalid), waiting or not, and
// is neither granted nor queued; one with the name's limit is served as
// usual; once nobody holds or waits, a new limit applies.
func testQueuePermitLimit(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("permitlimit")
	ttl := e.ttl(longTTL)
	p1 := e.granted(key, driver.ModePermit, 1)
	for _, wait := range []bool{false, true} {
		err := e.enqueueErr(e.qreq(key, newID(), driver.ModePermit, 100, wait, ttl))
		if !errors.Is(err, driver.ErrLimitMismatch) || !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("permit with limit 100 while one of limit 1 is held (wait %v): %v, want ErrLimitMismatch and ErrInvalid", wait, err)
		}
	}
	if ids := e.waiterIDs(key); len(ids) != 0 {
		t.Errorf("a refused request was queued: waiters %v", ids)
	}
	w := e.queued(key, driver.ModePermit, 1, ttl) // the name's limit: it waits
	e.releaseKind(driver.KindPermit, p1)
	g := e.takeGrant(w, driver.ModePermit, 1)
	// Only a waiter, behind an exclusive holder, keeps the limit too.
	e.releaseKind(driver.KindPermit, g)
	x := e.granted(key, driver.ModeExclusive, 0)
	w2 := e.queued(key, driver.ModePermit, 3, ttl)
	if err := e.enqueueErr(e.qreq(key, newID(), driver.ModePermit, 2, true, ttl)); !errors.Is(err, driver.ErrLimitMismatch) {
		t.Errorf("permit with limit 2 while one of limit 3 waits: %v, want ErrLimitMismatch", err)
	}
	// Its own requests are still served with its limit.
	if res := e.enqueue(e.qreq(key, w2.id, driver.ModePermit, 3, true, ttl)); !res.Queued {
		t.Errorf("the waiter's own poke: %+v, want queued", res)
	}
	e.releaseKind(driver.KindWaiter, w2)
	e.releaseKind(driver.KindLock, x)
	// Idle: the next limit is the name's.
	n1 := e.granted(key, driver.ModePermit, 2)
	n2 := e.granted(key, driver.ModePermit, 2)
	if res := e.enqueue(e.qreq(key, newID(), driver.ModePermit, 2, false, ttl)); res.Granted {
		t.Errorf("third permit granted with the name's new limit of 2")
	}
	if err := e.enqueueErr(e.qreq(key, newID(), driver.ModePermit, 1, false, ttl)); !errors.Is(err, driver.ErrLimitMismatch) {
		t.Errorf("permit with limit 1 while two of limit 2 are held: %v, want ErrLimitMismatch", err)
	}
	e.releaseKind(driver.KindPermit, n1)
	e.releaseKind(driver.KindPermit, n2)
}

// testQueueMaxWaiters: a waiting request with MaxWaiters is refused with
// ErrQueueFull (not ErrInvalid), and not queued, when the name already has
// that many waiters; the waiters' own requests are never refused for it;
// a request that does not wait is refused as usual; a place freed lets the
// next in.
func testQueueMaxWaiters(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("maxwaiters")
	ttl := e.ttl(longTTL)
	capped := func(id string, wait bool, max int) driver.QueueRequest {
		r := e.qreq(key, id, driver.ModeExclusive, 0, wait, ttl)
		r.MaxWaiters = max
		return r
	}
	holder := e.granted(key, driver.ModeExclusive, 0)
	var ws []lease
	for range 2 {
		id := newID()
		if res := e.enqueue(capped(id, true, 2)); !res.Queued {
			t.Fatalf("waiter within the cap: %+v, want queued", res)
		}
		ws = append(ws, lease{key, id, 0})
	}
	err := e.enqueueErr(capped(newID(), true, 2))
	if !errors.Is(err, driver.ErrQueueFull) || errors.Is(err, driver.ErrInvalid) {
		t.Errorf("third waiter with a cap of 2: %v, want ErrQueueFull and not ErrInvalid", err)
	}
	if ids := e.waiterIDs(key); len(ids) != 2 || ids[0] != ws[0].id || ids[1] != ws[1].id {
		t.Errorf("waiters %v, want the two within the cap", ids)
	}
	if res := e.enqueue(capped(ws[1].id, true, 1)); !res.Queued {
		t.Errorf("a waiter's own poke with a cap below the queue: %+v, want queued", res)
	}
	if res := e.enqueue(capped(newID(), false, 1)); res.Granted || res.Queued {
		t.Errorf("non-waiting request: %+v, want refused", res)
	}
	if res := e.enqueue(capped(newID(), true, 0)); !res.Queued {
		t.Errorf("waiter without a cap: %+v, want queued", res)
	} else {
		ws = append(ws, lease{key, e.waiterIDs(key)[2], 0})
	}
	e.releaseKind(driver.KindWaiter, ws[0])
	late := newID()
	if res := e.enqueue(capped(late, true, 3)); !res.Queued {
		t.Errorf("waiter after a place was freed: %+v, want queued", res)
	}
	for _, w := range append(ws[1:], lease{key, late, 0}) {
		e.releaseKind(driver.KindWaiter, w)
	}
	e.releaseKind(driver.KindLock, holder)
}

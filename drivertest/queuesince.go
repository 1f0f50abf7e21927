package drivertest

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// testQueueSinceIsGrant: a lease handed off from the queue was acquired
// when it was granted, not when its waiter joined, so Inspect's Since (what
// dlock status shows as HELD) does not count the wait.
func testQueueSinceIsGrant(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	in, ok := e.d.(driver.Inspector)
	if !ok {
		t.Skip("driver does not implement driver.Inspector")
	}
	key := e.key("since")
	holder := e.granted(key, driver.ModeExclusive, 0)
	w := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	// Longer than the second of tolerance below, which clocks counting
	// whole seconds need: the wait must be visible if Since counts it.
	time.Sleep(1500 * time.Millisecond)
	released := time.Now()
	e.releaseKind(driver.KindLock, holder)
	if _, ok := e.grants.waitFor(w.id, e.wait); !ok {
		t.Fatal("no grant")
	}
	info, ok, err := in.Inspect(e.ctx, key)
	if err != nil || !ok {
		t.Fatalf("Inspect after the hand-off: ok %v, err %v", ok, err)
	}
	if info.Since.Before(released.Add(-time.Second)) {
		t.Errorf("Inspect after a hand-off: Since = %v, %v before the release: the wait was counted as held",
			info.Since, released.Sub(info.Since).Round(time.Millisecond))
	}
	e.releaseKind(driver.KindLock, w)
}

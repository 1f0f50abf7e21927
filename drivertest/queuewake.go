package drivertest

import (
	"testing"

	"github.com/dlockio/dlock/driver"
)

// testQueueForceReleaseGrantsHead: Inspector.ForceRelease of a name with
// queued waiters grants the head at once and announces it, as a release
// does; nothing else would until the waiter's next renewal or poke.
func testQueueForceReleaseGrantsHead(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	in, ok := e.d.(driver.Inspector)
	if !ok {
		t.Skip("driver does not implement driver.Inspector")
	}
	key := e.key("forced")
	holder := e.granted(key, driver.ModeExclusive, 0)
	w := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	tok, ok, err := in.ForceRelease(e.ctx, key)
	if err != nil || !ok || tok != holder.token {
		t.Fatalf("ForceRelease: token %d, ok %v, err %v; want the holder's token %d", tok, ok, err, holder.token)
	}
	got := e.takeGrant(w, driver.ModeExclusive, 0)
	if got.token <= holder.token {
		t.Errorf("the head's token %d is not above the broken holder's %d", got.token, holder.token)
	}
	e.releaseKind(driver.KindLock, got)
}

// testQueueLastHolderWakesWatchers: when the last shared or permit holder
// of a name leaves, Watch callbacks for the name are called, as for a
// released plain lock: a plain Lock that waits for the name, refused while
// they held it, is woken (without them it would wait for its fallback, the
// holder's TTL).
func testQueueLastHolderWakesWatchers(t *testing.T, h Harness) {
	for _, c := range []struct {
		name  string
		mode  driver.Mode
		kind  driver.Kind
		limit int
	}{
		{"shared", driver.ModeShared, driver.KindRead, 0},
		{"permit", driver.ModePermit, driver.KindPermit, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newQEnv(t, h)
			key := e.key("wake")
			rec := e.recorder()
			e.add(e.watch(rec), key)
			a := e.granted(key, c.mode, c.limit)
			b := e.granted(key, c.mode, c.limit)
			if r := e.releaseKind(c.kind, a); r != driver.Released {
				t.Fatalf("release of one of two holders: %v", r)
			}
			if r := e.releaseKind(c.kind, b); r != driver.Released {
				t.Fatalf("release of the last holder: %v", r)
			}
			if !rec.wait(key, 1) {
				t.Fatalf("the last %s holder left: no release notification within %v", c.name, e.wait)
			}
			// The name is free for a plain acquisition now.
			e.releaseOne(e.acquire(key, e.ttl(longTTL)), driver.Released)
		})
	}
}

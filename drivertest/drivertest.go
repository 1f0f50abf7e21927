// Package drivertest is the conformance suite every dlock driver runs.
//
// A driver's test calls Run with a Harness that makes drivers on a real
// store (and, where it can, restarts that store); Run checks the promises
// of package driver: exclusion, fencing-token order across every kind of
// loss, idempotent retries after lost replies, batched renewal and release,
// release notifications, deadline behaviour, and bad input; and those of
// the optional interfaces the driver implements (several locks at once,
// inspection, the queue and its listing).
//
// The suite calls drivers directly, as dlock's engine does, and names every
// lock after the subtest that uses it, so drivers sharing one store do not
// collide. Most subtests run in parallel; those that restart the store run
// alone.
package drivertest

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Restart says how Harness.Restart restarts the store.
type Restart int

const (
	// RestartEmpty restarts the store with no data (no persistence).
	RestartEmpty Restart = iota + 1
	// RestartFromSnapshot restarts the store from the state saved by the
	// last Harness.Snapshot: older than what was written since, as after a
	// crash with periodic snapshots or a failover to a lagging replica.
	RestartFromSnapshot
)

// Harness tells the suite how to make and break a driver's store.
type Harness struct {
	// New returns a driver on a store that no other test shares (a fresh
	// store or a unique key prefix). The suite closes it. New is called
	// once per subtest, from parallel subtests.
	New func(t *testing.T) driver.Driver
	// Restart, if set, restarts the store of the drivers New made for t;
	// drivers made by New must work again afterwards (the first request
	// after a restart may fail while a connection is re-established; the
	// suite retries for up to Timeout). Subtests that need it are skipped
	// when it is nil. The suite calls it only while no other subtest of
	// the same Run is running.
	Restart func(t *testing.T, how Restart)
	// Snapshot, if set, saves the store's state for RestartFromSnapshot.
	Snapshot func(t *testing.T)
	// Timeout bounds each wait for something that should happen promptly:
	// a release notification, Watcher.Close returning, a restarted store
	// answering. Zero means 5 seconds.
	Timeout time.Duration
	// BadKeys, if set, are lock names the driver's KeyChecker must reject
	// with an error matching driver.ErrInvalid. Setting it for a driver
	// without a KeyChecker fails the suite.
	BadKeys []string
}

// Run runs the conformance suite as subtests of t.
//
// The subtests are grouped; groups run one after another and the subtests
// of a group in parallel, except those that restart the store, which run
// before their group's parallel subtests start. The groups check:
//
//   - Basics: sane Capabilities; exclusion, alone and among concurrent
//     contenders; unusual lock names; KeyChecker errors; calls with a done
//     ctx.
//   - Tokens: strictly increasing tokens across release, expiry, forced
//     release, and restarts of the store (empty and from a snapshot).
//   - Retry: repeated acquisitions and releases, as after lost replies;
//     releases by strangers; a batch of mixed release outcomes.
//   - Renew: thousands of leases renewed in MaxBatch chunks outlive their
//     original TTL; renewals of leases not held are false; empty batches.
//   - Watch: notifications after release and forced release, not after
//     Remove or Close, one at a time, none lost behind a slow callback; a
//     nil callback is invalid.
//   - Multi (driver.MultiAcquirer): all or none, busy key named, tokens
//     above earlier ones, retries with the same IDs, leftovers of a partly
//     undone grant released, exclusion among concurrent overlapping sets,
//     bad input.
//   - Inspector: Inspect, List by literal prefix, ForceRelease.
//   - Queue (driver.Queuer): FIFO grants by hand-off, no overtaking, dead
//     waiters and expired holders, cancelled and raced waiters, readers,
//     permits, the TTL and acquisition time of a grant, InspectQueue, bad
//     input.
//   - QueueList (driver.QueueLister): ListQueues by literal prefix, with
//     holders and waiters; emptied names disappear.
//
// Subtests needing an optional interface or Harness field the driver
// lacks are skipped.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("drivertest: Harness.New is nil")
	}
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Basics", []subtest{
			{"Capabilities", testCapabilities, true},
			{"Exclusion", testExclusion, true},
			{"ExclusionContended", testExclusionContended, true},
			{"Keys", testKeys, true},
			{"KeyChecker", testKeyChecker, true},
			{"Context", testContext, true},
			{"UnknownKind", testUnknownKind, true},
		}},
		{"Tokens", []subtest{
			{"RestartEmpty", testRestartEmpty, false},
			{"RestartFromSnapshot", testRestartFromSnapshot, false},
			{"Release", testTokensRelease, true},
			{"Expiry", testTokensExpiry, true},
			{"ForceRelease", testTokensForceRelease, true},
		}},
		{"Retry", []subtest{
			{"Acquire", testRetryAcquire, true},
			{"Release", testRetryRelease, true},
			{"AfterNextRelease", testRetryAfterNextRelease, true},
			{"Stranger", testRetryStranger, true},
			{"ReleaseBatch", testReleaseBatch, true},
		}},
		{"Renew", []subtest{
			{"Extends", testRenewExtends, true},
			{"NotHeld", testRenewNotHeld, true},
			{"Empty", testRenewEmpty, true},
		}},
		{"Watch", []subtest{
			{"Release", testWatchRelease, true},
			{"SlowCallback", testWatchSlowCallback, true},
			{"ForceRelease", testWatchForceRelease, true},
			{"Remove", testWatchRemove, true},
			{"Nil", testWatchNil, true},
			{"Close", testWatchClose, true},
		}},
		{"Multi", []subtest{
			{"AllOrNone", testMultiAllOrNone, true},
			{"Retry", testMultiRetry, true},
			{"Contended", testMultiContended, true},
			{"Invalid", testMultiInvalid, true},
		}},
		{"Inspector", []subtest{
			{"Inspect", testInspect, true},
			{"List", testList, true},
			{"ForceRelease", testForceRelease, true},
		}},
		{"Queue", queueTests},
		{"QueueList", queueListTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					if st.parallel {
						t.Parallel()
					}
					st.fn(t, h)
				})
			}
		})
	}
}

type subtest struct {
	name     string
	fn       func(t *testing.T, h Harness)
	parallel bool
}

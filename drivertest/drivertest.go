// Package drivertest is the conformance suite every dlock driver runs.
//
// A driver's test calls Run with a Harness that makes drivers on a real
// store (and, where it can, restarts that store); Run checks the promises
// of package driver: exclusion, fencing-token order across every kind of
// loss, idempotent retries after lost replies, batched renewal and release,
// release notifications, deadline behaviour, and bad input.
package drivertest

import (
	"testing"

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
	// store or a unique key prefix). The suite closes it.
	New func(t *testing.T) driver.Driver
	// Restart, if set, restarts the store; drivers made by New must work
	// again afterwards. Subtests that need it are skipped when it is nil.
	Restart func(t *testing.T, how Restart)
	// Snapshot, if set, saves the store's state for RestartFromSnapshot.
	Snapshot func(t *testing.T)
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	// TODO: the suite.
}

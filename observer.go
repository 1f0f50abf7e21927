package dlock

import (
	"fmt"

	"github.com/dlockio/dlock/internal/engine"
)

// Observer receives what a Client does, for metrics and traces (the
// Prometheus and OpenTelemetry packages of this module's repository
// implement it). Install it with WithObserver.
//
// A Client never calls an Observer on its own paths: events are queued and
// delivered, in the order they happened, by one goroutine per Client, in
// batches about 100 ms apart (so events reach the Observer up to that much
// after they happened; each carries its own times), so an
// Observer needs no locking of its own against itself, and one that is slow
// or blocks delays only its own events — never Lock, Unlock, a renewal, or
// the end of a lease. The queue is bounded (32,768 events); beyond that
// events are dropped and counted in Stats.ObserverDropped, a lease's or a
// waiter's start and end together, so that gauges built on the pairs stay
// true (an end whose start was queued is queued past the bound). Close delivers
// what is queued, waiting at most a second for an Observer that blocks.
//
// Embed BaseObserver to implement only the methods you need. The methods:
// Acquire, once per Lock or TryLock call that got past argument checks;
// Release, once per Unlock call that did work; Renew, once per answered
// renewal batch; Lost, once per lease that ended without Unlock; Wait, when
// a Lock call starts and stops waiting for a busy lock; BackendError, for
// every store failure.
type Observer = engine.Observer

// Outcomes reported in AcquireEvent.Result and ReleaseEvent.Result; fixed
// snake_case names, usable as metric label values.
const (
	ResultAcquired = engine.ResultAcquired // Lock or TryLock: granted
	ResultBusy     = engine.ResultBusy     // TryLock: another owner holds the lock (ErrNotAcquired)
	ResultCanceled = engine.ResultCanceled // the call's ctx ended first
	ResultClosed   = engine.ResultClosed   // the Client was closed (ErrClosed)
	ResultError    = engine.ResultError    // the store failed (ErrBackend), or refused the request
	ResultReleased = engine.ResultReleased // Unlock: freed
	ResultNotHeld  = engine.ResultNotHeld  // Unlock: the lease had been lost (ErrNotHeld)
)

// Reasons reported in LostEvent.Reason.
const (
	LostNotHeld  = engine.LostNotHeld  // a renewal found the lock no longer ours (expired, force-released, store restarted)
	LostDeadline = engine.LostDeadline // the validity deadline passed without a successful renewal
	LostClosed   = engine.LostClosed   // Client.Close ended the lease
	LostGroup    = engine.LostGroup    // another lock of its multi-lock was lost, which ended the multi-lock and this lock with it
)

// AcquireEvent describes one Lock or TryLock call: its context (for a
// tracer's parent span), primitive ("lock", "read", "write", "permit", ...),
// key, Result, start, wait, attempts, token and error.
type AcquireEvent = engine.AcquireEvent

// ReleaseEvent describes one Unlock call: its result, start, how long the
// lease was held, its latency, and WasHeld, true for exactly the one Unlock
// call per lease that ended a lease still held.
type ReleaseEvent = engine.ReleaseEvent

// RenewEvent describes one renewal batch: one driver call for up to the
// driver's batch size of leases.
type RenewEvent = engine.RenewEvent

// LostEvent describes a lease that ended without Unlock, and why (one of
// the Lost constants).
type LostEvent = engine.LostEvent

// WaitEvent describes a Lock call joining or leaving the wait for a busy
// lock, with this Client's waiters after the change.
type WaitEvent = engine.WaitEvent

// BackendErrorEvent describes a store failure: of an acquisition attempt,
// a release, a renewal batch or a background release.
type BackendErrorEvent = engine.BackendErrorEvent

// BaseObserver implements Observer with methods that do nothing; embed it
// to implement only some.
type BaseObserver struct{}

// Acquire does nothing.
func (BaseObserver) Acquire(AcquireEvent) {}

// Release does nothing.
func (BaseObserver) Release(ReleaseEvent) {}

// Renew does nothing.
func (BaseObserver) Renew(RenewEvent) {}

// Lost does nothing.
func (BaseObserver) Lost(LostEvent) {}

// Wait does nothing.
func (BaseObserver) Wait(WaitEvent) {}

// BackendError does nothing.
func (BaseObserver) BackendError(BackendErrorEvent) {}

// WithObserver installs o to receive the Client's events (see Observer).
// Without it, events cost nothing: no allocation, no queue, no goroutine.
func WithObserver(o Observer) Option {
	return func(c *clientConfig) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidArgument)
		}
		c.observer = o
		return nil
	}
}

// Stats is a snapshot of a Client, like sql.DBStats: gauges of now, and
// totals since New. The totals are counted whether or not an Observer is
// installed, and never dropped.
type Stats = engine.Stats

// Stats returns a snapshot of the Client's state and totals. It is cheap
// (a few atomic loads and one short lock) and safe to call at any time,
// also after Close.
func (c *Client) Stats() Stats {
	return c.e.Stats()
}

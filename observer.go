package dlock

import (
	"context"
	"fmt"
	"time"

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
// Embed BaseObserver to implement only the methods you need.
type Observer interface {
	// Acquire is called once per Lock or TryLock call that got past
	// argument checks, with its outcome.
	Acquire(AcquireEvent)
	// Release is called once per Unlock call that did work (a repeated
	// Unlock answered from memory is not reported again).
	Release(ReleaseEvent)
	// Renew is called once per answered renewal batch.
	Renew(RenewEvent)
	// Lost is called once per lease that ended without Unlock.
	Lost(LostEvent)
	// Wait is called when a Lock call starts waiting for a busy lock and
	// when it stops (acquired, failed, or cancelled).
	Wait(WaitEvent)
	// BackendError is called for every store failure: of an acquisition
	// attempt that Lock or TryLock returned, of Unlock, of a renewal batch,
	// of a background release.
	BackendError(BackendErrorEvent)
}

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

// AcquireEvent describes one Lock or TryLock call.
type AcquireEvent struct {
	// Ctx is the call's context, for a tracer to find its parent span.
	// It may be done by the time the event is delivered.
	Ctx context.Context
	// Primitive is the kind of lease: "lock" for Lock and TryLock.
	Primitive string
	Key       string
	Result    string        // one of the Result constants
	Start     time.Time     // when the call reached the Client's engine
	Wait      time.Duration // how long the call took, waiting included
	Attempts  int           // acquisition requests sent to the store
	Token     uint64        // the fencing token, when acquired
	Err       error         // what the call returned; nil when acquired
}

// ReleaseEvent describes one Unlock call.
type ReleaseEvent struct {
	Ctx       context.Context // the call's context (nil if the call passed nil)
	Primitive string
	Key       string
	Result    string        // one of the Result constants
	Start     time.Time     // when Unlock was called
	Held      time.Duration // from the acquire request that got the lock (a queued lease: from the grant's arrival) to this call
	Latency   time.Duration // how long the call took
	// WasHeld reports that this call ended a lease that was still held
	// (not lost, not closed): Held is then the lease's hold time. True for
	// exactly one Unlock call per lease; a lease ends either so or with a
	// LostEvent, never both.
	WasHeld bool
	Err     error // what Unlock returned
}

// RenewEvent describes one renewal batch: one driver call for up to the
// driver's batch size of leases.
type RenewEvent struct {
	Leases  int           // leases in the batch
	NotHeld int           // of them, found no longer ours (each also gets a LostEvent)
	Latency time.Duration // from sending the batch to applying its answer
	Err     error         // the store's failure; the leases are retried until their deadlines
}

// LostEvent describes a lease that ended without Unlock.
type LostEvent struct {
	Primitive string
	Key       string
	Token     uint64
	Reason    string        // LostNotHeld, LostDeadline, LostClosed or LostGroup
	Held      time.Duration // from the acquire request that got the lock (a queued lease: from the grant's arrival) to the loss
}

// WaitEvent describes a Lock call joining or leaving the wait for a busy
// lock.
type WaitEvent struct {
	Primitive string
	Key       string
	Started   bool // true when it starts waiting, false when it stops
	Depth     int  // this Client's waiters for Key after the change
	Waiters   int  // this Client's waiters for any key after the change
}

// BackendErrorEvent describes a store failure.
type BackendErrorEvent struct {
	// Op is "acquire", "release", "renew" or "background release".
	Op        string
	Primitive string
	Key       string // empty for renewals and background releases, which are batches
	Err       error
}

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

// observerAdapter turns the engine's events into dlock's: the types are
// field-for-field the same, so each is a conversion, not a copy by hand.
type observerAdapter struct{ o Observer }

func (a observerAdapter) Acquire(ev engine.AcquireEvent) { a.o.Acquire(AcquireEvent(ev)) }
func (a observerAdapter) Release(ev engine.ReleaseEvent) { a.o.Release(ReleaseEvent(ev)) }
func (a observerAdapter) Renew(ev engine.RenewEvent)     { a.o.Renew(RenewEvent(ev)) }
func (a observerAdapter) Lost(ev engine.LostEvent)       { a.o.Lost(LostEvent(ev)) }
func (a observerAdapter) Wait(ev engine.WaitEvent)       { a.o.Wait(WaitEvent(ev)) }
func (a observerAdapter) BackendError(ev engine.BackendErrorEvent) {
	a.o.BackendError(BackendErrorEvent(ev))
}

// Stats is a snapshot of a Client, like sql.DBStats: gauges of now, and
// totals since New. The totals are counted whether or not an Observer is
// installed, and never dropped.
type Stats struct {
	Held             int // leases held now (every primitive)
	Waiters          int // Lock calls waiting for a busy lock now
	RenewalsInFlight int // renewal batches sent and not answered yet

	Acquired      uint64 // successful acquisitions
	Released      uint64 // Unlock calls that released (ResultReleased)
	Lost          uint64 // leases lost: not ours any more, deadline passed, or ended with their multi-lock (not Close)
	RenewFailures uint64 // renewal batches that failed with a store error
	BackendErrors uint64 // store failures of every kind (see BackendErrorEvent)
	// ObserverDropped counts events the Observer never got because its
	// queue was full (it was too slow, or blocked).
	ObserverDropped uint64
}

// Stats returns a snapshot of the Client's state and totals. It is cheap
// (a few atomic loads and one short lock) and safe to call at any time,
// also after Close.
func (c *Client) Stats() Stats {
	s := c.e.Stats()
	return Stats{
		Held: s.Held, Waiters: s.Waiters, RenewalsInFlight: s.RenewalsInFlight,
		Acquired: s.Acquired, Released: s.Released, Lost: s.Lost,
		RenewFailures: s.RenewFailures, BackendErrors: s.BackendErrors, ObserverDropped: s.Dropped,
	}
}

package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Hold is one acquisition tracked by the engine: the state every kind of
// lease shares — identity, fencing token, validity deadline, and the end
// signal. The root package wraps it in the types users see.
//
// A hold ends once: released, lost, or closed. Err and Context().Err()
// compare the clock with the validity deadline themselves, so a hold never
// reports itself held past its deadline, however late the renewal loop or
// the Go scheduler runs; Done is closed by the first of the renewal loop, a
// timer-free check in Err, or the end of the lease for any other reason.
type Hold struct {
	e     *Engine
	kind  driver.Kind
	key   string
	id    string
	token uint64
	ttl   time.Duration
	// acquired is when the lock was got, for hold times: the send time of
	// the request that was granted, or, for a queued lease handed over
	// from its place, when the Client learned of the grant.
	acquired    time.Time
	releaseSeen atomic.Bool // a Release event has claimed the end of the hold (observe.go)

	// deadline is the validity deadline in nanoseconds since e.epoch: the
	// hold is lost at this instant unless a renewal moved it. Written under
	// the renewer's lock, read without it.
	deadline atomic.Int64
	watch    watchState // guarded by the renewer's lock

	inner  context.Context // cancelled with the end reason as cause
	cancel context.CancelCauseFunc
	ended  atomic.Bool

	mu         sync.Mutex
	reason     error // why the hold ended; nil while held
	unlockDone bool  // Release gave a definitive answer
	unlockErr  error // that answer
	unlock     unlockTurn
	// The pairing of the hold's start and end events (observe.go): its
	// start was queued, or dropped (the queue was full); its end, when it
	// came first, waiting for the start.
	startQueued, startDropped bool
	endFirst                  *event
}

// Key returns the lock's name.
func (h *Hold) Key() string { return h.key }

// Kind returns which primitive the hold belongs to.
func (h *Hold) Kind() driver.Kind { return h.kind }

// ID returns the acquisition's random owner id.
func (h *Hold) ID() string { return h.id }

// Token returns the fencing token of the acquisition.
func (h *Hold) Token() uint64 { return h.token }

// TTL returns the lock's time-to-live in the store.
func (h *Hold) TTL() time.Duration { return h.ttl }

// Deadline returns the current validity deadline.
func (h *Hold) Deadline() time.Time {
	return h.e.epoch.Add(time.Duration(h.deadline.Load()))
}

// Done returns a channel closed when the hold ends.
func (h *Hold) Done() <-chan struct{} { return h.inner.Done() }

// Context returns a context that is done when the hold ends; its Err, like
// the hold's, checks the deadline on every call.
func (h *Hold) Context() context.Context { return leaseContext[*Hold]{h} }

// Err returns nil while the hold is valid, else why it ended.
func (h *Hold) Err() error {
	if !h.ended.Load() {
		if h.e.sinceEpoch() < h.deadline.Load() {
			return nil
		}
		h.lose(LostDeadline)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reason
}

// end records why the hold ended; the first reason wins. It never blocks:
// cancelling a context only closes a channel and cancels its children.
func (h *Hold) end(reason error) bool {
	h.mu.Lock()
	if h.reason != nil {
		h.mu.Unlock()
		return false
	}
	h.reason = reason
	h.ended.Store(true)
	h.mu.Unlock()
	h.cancel(reason)
	return true
}

// releaseRequest is the driver request that releases h.
func (h *Hold) releaseRequest() driver.ReleaseRequest {
	return driver.ReleaseRequest{Kind: h.kind, Key: h.key, ID: h.id}
}

// leaseContext is Hold.Context and Group.Context: the inner context's
// values and done channel, with an Err that notices a passed deadline by
// itself. Value forwards to the inner context, so context.Cause and child
// contexts see the inner cancelCtx and its cause. It is generic, not an
// interface field, so that it stays one pointer wide: returning it as a
// context.Context allocates nothing.
type leaseContext[L ending] struct{ l L }

// ending is what a leaseContext asks of a Hold or a Group.
type ending interface {
	Err() error
	base() (context.Context, context.CancelCauseFunc)
}

func (c leaseContext[L]) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c leaseContext[L]) Done() <-chan struct{}       { inner, _ := c.l.base(); return inner.Done() }
func (c leaseContext[L]) Value(key any) any           { inner, _ := c.l.base(); return inner.Value(key) }

func (c leaseContext[L]) Err() error {
	if err := c.l.Err(); err != nil {
		// A no-op once cancelled; otherwise (end is running concurrently)
		// it makes Done closed before Err reports, as contexts promise.
		_, cancel := c.l.base()
		cancel(err)
		return context.Canceled
	}
	return nil
}

func (h *Hold) base() (context.Context, context.CancelCauseFunc) { return h.inner, h.cancel }

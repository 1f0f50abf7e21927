package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Observer receives what a Client does, for metrics and traces; the root
// package gives it to users as dlock.Observer (see its doc for the delivery
// promises). The engine never calls it on its own paths: events go through a
// bounded queue to one goroutine that calls the Observer (see observerQueue),
// so an Observer that blocks delays only its own events, never a lease's end.
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

// Outcome names, used as metric label values: short, fixed, snake_case.
const (
	ResultAcquired = "acquired" // acquisition: granted
	ResultBusy     = "busy"     // acquisition: TryLock found it held
	ResultCanceled = "canceled" // the caller's ctx ended first
	ResultClosed   = "closed"   // the Client was closed
	ResultError    = "error"    // backend failure (or a driver that refused the request)
	ResultReleased = "released" // release: freed (also a retry after a lost reply)
	ResultNotHeld  = "not_held" // release: the lease had been lost

	LostNotHeld  = "not_held" // a renewal found the lock no longer ours
	LostDeadline = "deadline" // the validity deadline passed without a renewal
	LostGroup    = "group"    // another lock of its multi-lock was lost: the multi-lock ended, and this lock with it
	LostClosed   = "closed"   // Client.Close ended the lease
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

// stats are the engine's counters: atomics, so they cost no allocation and
// no lock on the hot path, observer or not.
type stats struct {
	acquired, released, lost, renewFailures, backendErrors atomic.Uint64
	waiters, renewing                                      atomic.Int64
}

// Stats is a snapshot of a Client (dlock.Stats), like sql.DBStats: gauges of now, and
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

// Stats returns the current snapshot.
func (e *Engine) Stats() Stats {
	// The renewer drops a hold that ended (or passed its deadline) only
	// when its loop next wakes: count what is still valid now, as Err
	// would answer.
	now := e.sinceEpoch()
	e.renewer.mu.Lock()
	held := 0
	for _, x := range e.renewer.h {
		if x.h.kind != driver.KindWaiter && // a fair lock's waiter place is no lease
			!x.h.ended.Load() && now < x.h.deadline.Load() {
			held++
		}
	}
	e.renewer.mu.Unlock()
	var dropped uint64
	if e.obs != nil {
		dropped = e.obs.dropped.Load()
	}
	return Stats{
		Held:             held,
		Waiters:          int(e.stats.waiters.Load()),
		RenewalsInFlight: int(e.stats.renewing.Load()),
		Acquired:         e.stats.acquired.Load(),
		Released:         e.stats.released.Load(),
		Lost:             e.stats.lost.Load(),
		RenewFailures:    e.stats.renewFailures.Load(),
		BackendErrors:    e.stats.backendErrors.Load(),
		ObserverDropped:  dropped,
	}
}

// acquireOp follows one acquisition call from start to result.
type acquireOp struct {
	start    time.Time
	attempts *int // counted by a wrapped Send, only when observed
}

// startAcquire begins observing an acquisition of a; with an observer it
// wraps a.Send to count attempts (the only allocation, and only then).
func (e *Engine) startAcquire(a *Attempt) acquireOp {
	var op acquireOp
	if e.obs != nil { // reading the clock costs too, on some machines more than the rest
		op.start = e.now()
		n, send := new(int), a.Send
		a.Send = func(ctx context.Context, id string, waiting bool) (driver.AcquireResult, error) {
			*n++ // attempts of one call are sequential
			return send(ctx, id, waiting)
		}
		op.attempts = n
	}
	return op
}

// doneAcquire records the outcome of an acquisition.
func (e *Engine) doneAcquire(ctx context.Context, op acquireOp, a Attempt, h *Hold, err error) {
	result := acquireResult(ctx, h, err)
	switch result {
	case ResultAcquired:
		e.stats.acquired.Add(1)
	case ResultError:
		if errors.Is(err, ErrBackend) { // not a request the driver refused as invalid
			e.backendError("acquire", a.Kind, a.Key, err)
		}
	}
	if e.obs == nil {
		return
	}
	ev := event{typ: evAcquire, ctx: ctx, kind: a.Kind, key: a.Key, what: result,
		start: op.start, d1: e.now().Sub(op.start), err: err}
	if op.attempts != nil {
		ev.n1 = *op.attempts
	}
	if h != nil {
		ev.token = h.token
		e.pushStart(h, ev)
		return
	}
	e.obs.push(ev)
}

// Every lease starts and ends once in the events (its acquisition; its
// release with WasHeld, or its loss), and gauges of leases held are built
// on the pairs. The pair is delivered in order, start first, or dropped
// whole when the queue is full: pushStart remembers a dropped start, and
// pushEnd drops the end of such a lease and queues every other end
// whatever the queue's length. An end that comes before its start was
// queued (Close, or a loss, between the store's grant and the recording
// of the acquisition) waits for it.

// pushStart queues ev, the start of h's hold, and the end that waited for
// it, if any (then the start is queued whatever the queue's length).
func (e *Engine) pushStart(h *Hold, ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.endFirst
	h.endFirst = nil
	h.startQueued = e.obs.add(ev, end != nil)
	h.startDropped = !h.startQueued
	switch {
	case end == nil:
	case h.startQueued:
		e.obs.pushEnd(*end)
	default:
		e.obs.dropEnd()
	}
}

// pushEnd queues ev, the end of h's hold, unless its start was dropped;
// before its start, it waits for it.
func (e *Engine) pushEnd(h *Hold, ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.startDropped:
		e.obs.dropEnd()
	case h.startQueued:
		e.obs.pushEnd(ev)
	default:
		h.endFirst = &ev
	}
}

func acquireResult(ctx context.Context, h *Hold, err error) string {
	switch {
	case h != nil:
		return ResultAcquired
	case errors.Is(err, ErrNotAcquired):
		return ResultBusy
	case errors.Is(err, ErrClosed):
		return ResultClosed
	case ctx.Err() != nil:
		return ResultCanceled
	}
	return ResultError
}

// observeStart is the start time of an observed call: zero, without a
// clock read, when nobody observes.
func (e *Engine) observeStart() time.Time {
	if e.obs == nil {
		return time.Time{}
	}
	return e.now()
}

// answered reports whether Release already gave h a definitive answer, so
// that a repeated call, which does nothing, is not counted again.
func (h *Hold) answered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unlockDone
}

// doneRelease records the outcome of a Release call that started at start.
func (e *Engine) doneRelease(ctx context.Context, h *Hold, start time.Time, err error) {
	if e.releaseResult(ctx, h, start, err) == ResultError && errors.Is(err, ErrBackend) {
		e.backendError("release", h.kind, h.key, err)
	}
}

// releaseResult records one lease's release, as doneRelease does, except
// for the store failure, which is its caller's to report (once per call),
// and returns the result.
func (e *Engine) releaseResult(ctx context.Context, h *Hold, start time.Time, err error) string {
	var result string
	switch {
	case err == nil:
		result = ResultReleased
		e.stats.released.Add(1)
	case errors.Is(err, ErrNotHeld):
		result = ResultNotHeld
	case errors.Is(err, ErrClosed):
		result = ResultClosed
	case ctx != nil && ctx.Err() != nil:
		result = ResultCanceled
	default:
		result = ResultError // a nil ctx too: an invalid call
	}
	if e.obs != nil {
		ev := event{typ: evRelease, ctx: ctx, kind: h.kind, key: h.key, what: result,
			start: start, d1: start.Sub(h.acquired), d2: e.now().Sub(start), err: err, started: h.endedByRelease()}
		if ev.started {
			e.pushEnd(h, ev)
		} else {
			e.obs.push(ev)
		}
	}
	return result
}

// endedByRelease reports, to exactly one Release call, whether a Release
// call (rather than a loss or Close) ended h: the call whose event then
// closes the lease's hold time.
func (h *Hold) endedByRelease() bool {
	h.mu.Lock()
	byRelease := h.reason == ErrReleased
	h.mu.Unlock()
	return byRelease && h.releaseSeen.CompareAndSwap(false, true)
}

// lose ends h as lost for why (LostNotHeld, LostDeadline or LostGroup), reporting
// whether this call ended it.
func (h *Hold) lose(why string) bool {
	if !h.end(lostError(why)) {
		return false
	}
	if h.kind == driver.KindWaiter {
		return true // a waiter's place is no lease: its waiter asks the store (queue.go)
	}
	h.e.stats.lost.Add(1)
	h.e.lostEvent(h, why)
	return true
}

func (e *Engine) lostEvent(h *Hold, why string) {
	if e.obs != nil && h.kind != driver.KindWaiter {
		e.pushEnd(h, event{typ: evLost, kind: h.kind, key: h.key, token: h.token, what: why,
			d1: e.now().Sub(h.acquired)})
	}
}

// renewed records an answered renewal batch.
func (e *Engine) renewed(res renewal, now time.Time) {
	notHeld := 0
	if res.err != nil {
		e.stats.renewFailures.Add(1)
		e.backendError("renew", res.holds[0].kind, "", res.err)
	} else {
		for _, ok := range res.held {
			if !ok {
				notHeld++
			}
		}
	}
	if e.obs != nil {
		e.obs.push(event{typ: evRenew, n1: len(res.holds), n2: notHeld, d1: now.Sub(res.sent), err: res.err})
	}
}

// waiting records a plain waiter joining (started) or leaving key's queue;
// see waitChanged.
func (e *Engine) waiting(a Attempt, started, observed bool) bool {
	return e.waitChanged(a.Kind, a.Key, started, observed)
}

// waitChanged counts a waiter of either kind (plain, or queued in the
// store) that starts or stops waiting, and tells the observer, with this
// engine's waiters for key after the change. The start reports whether
// its event was queued; the end is given that answer (observed), and is
// dropped when the start was, as a lease's end is (pushEnd): gauges of
// waiters are built on the pairs.
func (e *Engine) waitChanged(kind driver.Kind, key string, started, observed bool) bool {
	d := int64(-1)
	if started {
		d = 1
	}
	n := e.stats.waiters.Add(d)
	if e.obs == nil {
		return false
	}
	ev := event{typ: evWait, kind: kind, key: key, started: started, n1: e.waitDepth(key), n2: int(n)}
	switch {
	case started:
		return e.obs.push(ev)
	case observed:
		return e.obs.pushEnd(ev)
	}
	e.obs.dropEnd()
	return false
}

// waitDepth is how many of this engine's calls wait for key now, of both
// kinds: plain waiters (wait.go) and those queued in the store (grants.go)
// — a fair Lock and a WithoutFIFO Lock of one key are both its waiters.
func (e *Engine) waitDepth(key string) int {
	n := 0
	e.waits.mu.Lock()
	if q := e.waits.queues[key]; q != nil {
		n = len(q.waiters)
	}
	e.waits.mu.Unlock()
	e.queue.mu.Lock()
	n += e.queue.queued[key]
	e.queue.mu.Unlock()
	return n
}

// backendError counts a store failure for op and tells the observer.
func (e *Engine) backendError(op string, kind driver.Kind, key string, err error) {
	e.stats.backendErrors.Add(1)
	if e.obs != nil {
		e.obs.push(event{typ: evBackend, kind: kind, key: key, what: op, err: err})
	}
}

// Multi-locks (multi.go, group.go) report each lock they take as an
// acquisition of its own, when it is taken, and each lock they release as a
// release: every hold starts and ends once in the events, as single locks
// do, so gauges built on them stay exact. A multi-lock call that fails is
// one more acquisition event, named after all its keys.

// partAcquired records a lock taken by a multi-lock, whose request was
// sent at sent.
func (e *Engine) partAcquired(ctx context.Context, h *Hold, sent time.Time) {
	e.stats.acquired.Add(1)
	if e.obs != nil {
		e.pushStart(h, event{typ: evAcquire, ctx: ctx, kind: h.kind, key: h.key, what: ResultAcquired,
			start: sent, d1: e.now().Sub(sent), n1: 1, token: h.token})
	}
}

// failedAll records a multi-lock call that failed (started at start).
func (e *Engine) failedAll(ctx context.Context, start time.Time, reqs []driver.AcquireRequest, err error) {
	if err == nil {
		return
	}
	result := acquireResult(ctx, nil, err)
	name := keysName(reqs)
	if result == ResultError && errors.Is(err, ErrBackend) {
		e.backendError("acquire", driver.KindLock, name, err)
	}
	if e.obs != nil {
		e.obs.push(event{typ: evAcquire, ctx: ctx, kind: driver.KindLock, key: name, what: result,
			start: start, d1: e.now().Sub(start), err: err})
	}
}

// releasedGroup records a ReleaseGroup call: one release per lock, with the
// group's answer, or not_held for a lock that had been lost; and a store
// failure once, as for the call that failed (named after all its keys).
func (e *Engine) releasedGroup(ctx context.Context, g *Group, start time.Time, err error) {
	failed := false
	keys := make([]string, 0, len(g.holds))
	for _, h := range g.holds {
		herr := err
		h.mu.Lock()
		if errors.Is(h.reason, ErrLost) {
			herr = ErrNotHeld
		} else if errors.Is(err, ErrNotHeld) {
			herr = nil // the group's ErrNotHeld names other locks: this one was released
		}
		h.mu.Unlock()
		failed = e.releaseResult(ctx, h, start, herr) == ResultError || failed
		keys = append(keys, h.key)
	}
	if failed && errors.Is(err, ErrBackend) {
		e.backendError("release", driver.KindLock, strings.Join(keys, ", "), err)
	}
}

package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

type eventType uint8

const (
	evAcquire eventType = iota + 1
	evRelease
	evRenew
	evLost
	evWait
	evBackend
)

// event is one queued observer call, in a compact form shared by every
// type (what is the result, reason or operation; d1, d2, n1, n2 are the
// type's durations and counts, started a flag; see deliver). A value type, so the queue's
// backing arrays are reused without allocating.
type event struct {
	typ     eventType
	kind    driver.Kind
	started bool
	ctx     context.Context
	key     string
	what    string
	start   time.Time
	d1, d2  time.Duration
	n1, n2  int
	token   uint64
	err     error
}

// maxQueuedEvents bounds the observer queue: beyond it events are dropped
// and counted (Stats.ObserverDropped), so an Observer that stopped costs bounded
// memory and never blocks the engine.
const maxQueuedEvents = 1 << 15

// observerLinger is how long the queue lets events gather before it
// delivers them: a few goroutine wake-ups per second instead of one per
// event. Waking a goroutine costs far more than an event's work: on a
// loaded 2-core machine with a loopback Redis, one wake-up per event
// nearly doubled the CPU time of a lock cycle, batches 10 ms apart still
// added about 8 %, and 100 ms apart brought it within the noise (see
// BenchmarkMetricsCostPaired in the prometheus module). Events reach the
// Observer at most about this much later; each carries its own times.
const observerLinger = 100 * time.Millisecond

// observerFlushAt is the queue length at which a batch is delivered
// without waiting for the linger to end, so that a burst is never dropped
// for want of a wake-up: well below maxQueuedEvents.
const observerFlushAt = 4096

// observerQueue delivers events to an Observer on a goroutine of its own.
// Producers append under a mutex held only for the append, and wake the
// goroutine only when the queue was empty; the goroutine swaps the filled
// slice for its drained one, so steady state allocates nothing.
type observerQueue struct {
	o       Observer
	dropped atomic.Uint64
	batches atomic.Int64 // batches delivered, for tests of the batching

	mu     sync.Mutex
	buf    []event
	spare  []event
	closed bool

	kick    chan struct{} // the queue became non-empty
	full    chan struct{} // the queue reached observerFlushAt
	closing chan struct{} // closed by close: deliver what is left at once
	done    chan struct{}
}

func newObserverQueue(o Observer) *observerQueue {
	q := &observerQueue{o: o, kick: make(chan struct{}, 1), full: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// push queues ev, reporting whether it did; it never blocks. Beyond
// maxQueuedEvents it drops ev and counts it.
func (q *observerQueue) push(ev event) bool { return q.add(ev, false) }

// pushEnd queues the end of something whose start event was queued: a
// lease's release or loss, a waiter leaving. It is queued beyond
// maxQueuedEvents: dropped, it would leave every gauge built on the pairs
// (leases held, waiters) off for good, where dropping both start and end
// only loses history. The queue stays bounded: no start is queued while
// it is full, so the ends beyond it are at most one per lease or waiter
// alive, which the engine holds in memory anyway.
func (q *observerQueue) pushEnd(ev event) bool { return q.add(ev, true) }

// dropEnd counts the end of something whose start was dropped: it is
// dropped too, so that the pair is missing whole.
func (q *observerQueue) dropEnd() { q.dropped.Add(1) }

func (q *observerQueue) add(ev event, end bool) bool {
	q.mu.Lock()
	wake, full, queued := false, false, false
	switch {
	case q.closed:
	case len(q.buf) >= maxQueuedEvents && !end:
		q.dropped.Add(1)
	default:
		queued = true
		wake = len(q.buf) == 0
		q.buf = append(q.buf, ev)
		full = len(q.buf) == observerFlushAt
	}
	q.mu.Unlock()
	switch {
	case wake:
		signal(q.kick)
	case full:
		signal(q.full)
	}
	return queued
}

func (q *observerQueue) run() {
	defer close(q.done)
	linger := time.NewTimer(observerLinger)
	linger.Stop()
	for {
		closing := false
		select {
		case <-q.kick:
			linger.Reset(observerLinger)
			select {
			case <-linger.C:
			case <-q.full:
				linger.Stop()
			case <-q.closing:
				closing = true
			}
		case <-q.closing:
			closing = true
		}
		for q.drain() {
		}
		if closing {
			return // close refuses events from now on: nothing more can come
		}
	}
}

// drain delivers one batch, reporting whether it delivered anything.
func (q *observerQueue) drain() bool {
	q.mu.Lock()
	batch := q.buf
	q.buf, q.spare = q.spare[:0], nil
	q.mu.Unlock()
	if len(batch) > 0 {
		q.batches.Add(1)
	}
	for i := range batch {
		q.deliver(&batch[i])
		batch[i] = event{} // drop references (contexts, errors) early
	}
	q.mu.Lock()
	if q.spare == nil {
		q.spare = batch[:0]
	}
	q.mu.Unlock()
	return len(batch) > 0
}

// signal makes a non-blocking send on a channel buffered for one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (q *observerQueue) deliver(ev *event) {
	p := ev.kind.String()
	switch ev.typ {
	case evAcquire:
		q.o.Acquire(AcquireEvent{Ctx: ev.ctx, Primitive: p, Key: ev.key, Result: ev.what, Start: ev.start,
			Wait: ev.d1, Attempts: ev.n1, Token: ev.token, Err: ev.err})
	case evRelease:
		q.o.Release(ReleaseEvent{Ctx: ev.ctx, Primitive: p, Key: ev.key, Result: ev.what, Start: ev.start,
			Held: ev.d1, Latency: ev.d2, WasHeld: ev.started, Err: ev.err})
	case evRenew:
		q.o.Renew(RenewEvent{Leases: ev.n1, NotHeld: ev.n2, Latency: ev.d1, Err: ev.err})
	case evLost:
		q.o.Lost(LostEvent{Primitive: p, Key: ev.key, Token: ev.token, Reason: ev.what, Held: ev.d1})
	case evWait:
		q.o.Wait(WaitEvent{Primitive: p, Key: ev.key, Started: ev.started, Depth: ev.n1, Waiters: ev.n2})
	case evBackend:
		q.o.BackendError(BackendErrorEvent{Op: ev.what, Primitive: p, Key: ev.key, Err: ev.err})
	}
}

// close delivers what is queued, waiting at most logCloseWait for an
// Observer that blocks; its goroutine ends when the Observer returns.
func (q *observerQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	close(q.closing)
	select {
	case <-q.done:
	case <-time.After(logCloseWait):
	}
}

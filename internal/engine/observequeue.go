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
// and counted (Stats.Dropped), so an Observer that stopped costs bounded
// memory and never blocks the engine.
const maxQueuedEvents = 1 << 15

// observerLinger is how long the queue lets events gather before it
// delivers them: one goroutine wake-up per batch instead of one per event,
// which on a busy machine costs more than the event itself (a serial
// Lock+Unlock loop on a loopback Redis paid tens of µs per cycle for
// waking the goroutine at every event). Events reach the Observer at most
// about this much later.
const observerLinger = 10 * time.Millisecond

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
	closing chan struct{} // closed by close: deliver what is left at once
	done    chan struct{}
}

func newObserverQueue(o Observer) *observerQueue {
	q := &observerQueue{o: o, kick: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// push queues ev; it never blocks.
func (q *observerQueue) push(ev event) {
	q.mu.Lock()
	wake := false
	switch {
	case q.closed:
	case len(q.buf) >= maxQueuedEvents:
		q.dropped.Add(1)
	default:
		wake = len(q.buf) == 0
		q.buf = append(q.buf, ev)
	}
	q.mu.Unlock()
	if wake {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
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

package engine

import (
	"context"
	"sync"
)

// batcher sends the requests of one kind (Unlocks, Enqueues) that a
// Client's goroutines make while another is in flight together, in the
// next driver call, as renewals already go: a Client shared by many
// goroutines then pays one round trip and, on Redis, one read and one
// write of the server per batch instead of per request
// (docs/benchmarks.md). A lone request goes at once, as before.
//
// Only for a driver that is not ContextAware, whose calls run on caller
// goroutines anyway (call.go): a batch's call is made for all of its
// requests, so it cannot end with one caller's ctx. Each caller stops
// waiting for it when its own ctx ends or the engine closes, as call
// does; the call's context (batchCall) is done once every caller of the
// batch has, and late sees each answer nobody waited for.
type batcher[Q, R any] struct {
	e       *Engine
	sendOne func(ctx context.Context, req Q) (R, error)        // the driver call for one request
	send    func(ctx context.Context, reqs []Q) ([]R, []error) // and for several
	late    func(req Q, res R, err error)                      // nil: such answers are dropped

	mu      sync.Mutex
	pending []*batchWait[Q, R]
	sending bool // a batch is in flight: new requests wait for the next one
}

// batchWait is one request and, once its batch is answered, its result.
type batchWait[Q, R any] struct {
	ctx  context.Context // its caller's: the batch's call carries the first one's values
	req  Q
	res  R
	err  error
	done chan struct{} // closed when res and err are set, unless the caller left
	// Under batcher.mu: the caller stopped waiting (the answer is late's);
	// the batch that took the request.
	gone  bool
	batch *batchCall[Q, R]
}

// batchCall is a batch of requests and the context of its driver call:
// the first request's values, no deadline (it is not one caller's), done
// once every caller has stopped waiting.
type batchCall[Q, R any] struct {
	callContext
	waits   []*batchWait[Q, R]
	waiting int // callers still waiting; under batcher.mu
}

// do sends req in the next batch and returns its answer, or an error
// matching ctx's cause when ctx ends first, ErrClosed when the engine
// closes first. The caller holds an op.
func (b *batcher[Q, R]) do(ctx context.Context, req Q) (R, error) {
	b.mu.Lock()
	if !b.sending {
		// None in flight: this one goes at once, alone, as any driver call
		// does (call.go), and what gathers meanwhile goes after it.
		b.sending = true
		b.mu.Unlock()
		var late func(R, error)
		if b.late != nil {
			late = func(res R, err error) { b.late(req, res, err) }
		}
		return call(b.e, ctx, func(ctx context.Context) (R, error) {
			defer b.flush()
			return b.sendOne(ctx, req)
		}, late)
	}
	w := &batchWait[Q, R]{ctx: ctx, req: req, done: make(chan struct{})}
	b.pending = append(b.pending, w)
	b.mu.Unlock()
	var cause error
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-b.e.ctx.Done():
		cause = ErrClosed
	}
	if !b.leave(w) { // answered meanwhile
		<-w.done
		return w.res, w.err
	}
	var zero R
	return zero, cause
}

// leave notes that w's caller stops waiting, unless w was answered: then
// it returns false. The last of a batch to leave ends its call's context.
func (b *batcher[Q, R]) leave(w *batchWait[Q, R]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.done:
		return false
	default:
	}
	w.gone = true
	if c := w.batch; c != nil {
		if c.waiting--; c.waiting == 0 {
			c.abandon(nil)
		}
	}
	return true
}

// takeLocked takes up to MaxBatch pending requests; b.mu is held.
func (b *batcher[Q, R]) takeLocked() *batchCall[Q, R] {
	n := min(len(b.pending), b.e.caps.MaxBatch)
	c := &batchCall[Q, R]{waits: b.pending[:n:n]}
	c.callContext = newCallContext(c.waits[0].ctx, false)
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil // lets the taken batch's array go with it
	}
	for _, w := range c.waits {
		w.batch = c
		if !w.gone {
			c.waiting++
		}
	}
	if c.waiting == 0 {
		c.abandon(nil)
	}
	return c
}

// flush hands the batch that gathered while a call was in flight to a
// caller goroutine, or marks the batcher idle. It runs under the op of
// the call that was in flight.
func (b *batcher[Q, R]) flush() {
	if next := b.next(); next != nil {
		b.e.ops.Add(1)
		b.e.callers.run(&batchJob[Q, R]{b, next})
	}
}

// next takes the batch that gathered while one was in flight, or marks
// the batcher idle and returns nil.
func (b *batcher[Q, R]) next() *batchCall[Q, R] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.sending = false
		return nil
	}
	return b.takeLocked()
}

// call makes the driver call for batch, under ctx, and hands each request
// its answer: to its caller, or to late once the caller has left.
func (b *batcher[Q, R]) call(ctx context.Context, batch *batchCall[Q, R]) {
	reqs := make([]Q, len(batch.waits))
	for i, w := range batch.waits {
		reqs[i] = w.req
	}
	res, errs := b.send(ctx, reqs)
	b.mu.Lock()
	var late []*batchWait[Q, R]
	for i, w := range batch.waits {
		w.res, w.err = res[i], errs[i]
		if w.gone {
			late = append(late, w)
		} else {
			close(w.done)
		}
	}
	b.mu.Unlock()
	if b.late != nil {
		for _, w := range late {
			b.late(w.req, w.res, w.err)
		}
	}
}

// batchJob sends batches on a caller goroutine until none is pending.
type batchJob[Q, R any] struct {
	b     *batcher[Q, R]
	batch *batchCall[Q, R]
}

func (j *batchJob[Q, R]) run() {
	defer j.b.e.ops.Done()
	for batch := j.batch; batch != nil; batch = j.b.next() {
		j.b.call(&batch.callContext, batch)
	}
}

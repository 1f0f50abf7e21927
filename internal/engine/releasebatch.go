package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// releaseBatch sends the Unlocks of a Client that arrive while another is
// in flight together, in the next Driver.Release call, as renewals already
// go: a Client shared by many goroutines then pays one round trip and, on
// Redis, one script call per batch instead of one per Unlock
// (docs/benchmarks.md). A lone Unlock goes at once, as before.
//
// Only for a driver that is not ContextAware, whose calls run on caller
// goroutines anyway (call.go): a batch's call is made for all of its
// requests, so it cannot end with one caller's ctx. Each caller stops
// waiting for it when its own ctx ends or the engine closes, as call
// does, and the call's context (batchCall) is done once every caller of
// the batch has.
type releaseBatch struct {
	e       *Engine
	mu      sync.Mutex
	pending []*releaseWait
	sending bool // a batch is in flight: new requests wait for the next one
}

// releaseWait is one request and, once its batch is answered, its result.
type releaseWait struct {
	ctx  context.Context // its caller's: the batch's call carries the first one's values
	req  driver.ReleaseRequest
	res  driver.ReleaseResult
	err  error
	done chan struct{} // closed when res and err are set
	// Under releaseBatch.mu: the caller stopped waiting; the batch that
	// took the request.
	gone  bool
	batch *batchCall
}

// batchCall is a batch of requests and the context of its Release call:
// the first request's values, done once every caller has stopped waiting.
type batchCall struct {
	waits     []*releaseWait
	waiting   int           // callers still waiting; under releaseBatch.mu
	abandoned chan struct{} // closed when waiting reaches 0
}

func (c *batchCall) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *batchCall) Done() <-chan struct{}       { return c.abandoned }
func (c *batchCall) Value(key any) any           { return c.waits[0].ctx.Value(key) }

func (c *batchCall) Err() error {
	select {
	case <-c.abandoned:
		return context.Canceled
	default:
		return nil
	}
}

// release sends req in the next batch and returns its result, or an error
// matching ctx's cause when ctx ends first, ErrClosed when the engine
// closes first. The caller holds an op.
func (b *releaseBatch) release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	w := &releaseWait{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	var batch *batchCall
	if !b.sending {
		b.sending = true
		batch = b.takeLocked()
	}
	b.mu.Unlock()
	switch {
	case batch == nil: // the batch in flight takes this one next
	case ctx.Done() == nil:
		// Nothing but Close can end this call: send on this goroutine,
		// and leave any batch that gathered meanwhile to a caller goroutine.
		b.send(valuesOf{ctx, b.e.ctx}, batch)
		if next := b.next(); next != nil {
			b.e.ops.Add(1)
			b.e.callers.run(&releaseJob{b, next})
		}
	default:
		b.e.ops.Add(1) // the caller holds an op, so Close cannot be waiting yet
		b.e.callers.run(&releaseJob{b, batch})
	}
	var cause error
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-b.e.ctx.Done():
		cause = ErrClosed
	}
	select {
	case <-w.done: // answered meanwhile
		return w.res, w.err
	default:
	}
	b.leave(w)
	return 0, cause
}

// leave notes that w's caller stopped waiting; the last of a batch to
// leave ends its call's context.
func (b *releaseBatch) leave(w *releaseWait) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.gone = true
	if c := w.batch; c != nil {
		if c.waiting--; c.waiting == 0 {
			close(c.abandoned)
		}
	}
}

// takeLocked takes up to MaxBatch pending requests; b.mu is held.
func (b *releaseBatch) takeLocked() *batchCall {
	n := min(len(b.pending), b.e.caps.MaxBatch)
	c := &batchCall{waits: b.pending[:n:n], abandoned: make(chan struct{})}
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
		close(c.abandoned)
	}
	return c
}

// next takes the batch that gathered while one was in flight, or marks
// the batcher idle and returns nil.
func (b *releaseBatch) next() *batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.sending = false
		return nil
	}
	return b.takeLocked()
}

// send makes one Release call for batch, under ctx, and hands each
// request its result.
func (b *releaseBatch) send(ctx context.Context, batch *batchCall) {
	reqs := make([]driver.ReleaseRequest, len(batch.waits))
	for i, w := range batch.waits {
		reqs[i] = w.req
	}
	res, err := b.e.drv.Release(ctx, reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("driver answered %d results for %d releases", len(res), len(reqs))
	}
	for i, w := range batch.waits {
		if err != nil {
			w.err = err
		} else {
			w.res = res[i]
		}
		close(w.done)
	}
}

// releaseJob sends batches on a caller goroutine until none is pending.
type releaseJob struct {
	b     *releaseBatch
	batch *batchCall
}

func (j *releaseJob) run() {
	defer j.b.e.ops.Done()
	for batch := j.batch; batch != nil; batch = j.b.next() {
		j.b.send(batch, batch)
	}
}

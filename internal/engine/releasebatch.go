package engine

import (
	"context"
	"fmt"
	"sync"

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
// requests, so it cannot end with one caller's ctx; each caller stops
// waiting for it when its own ctx ends, as call does.
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
}

// release sends req in the next batch and returns its result, or an error
// matching ctx's cause when ctx ends first, ErrClosed when the engine
// closes first. The caller holds an op.
func (b *releaseBatch) release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	w := &releaseWait{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, w)
	var batch []*releaseWait
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
		b.send(batch)
		if next := b.next(); next != nil {
			b.e.ops.Add(1)
			b.e.callers.run(&releaseJob{b, next})
		}
	default:
		b.e.ops.Add(1) // the caller holds an op, so Close cannot be waiting yet
		b.e.callers.run(&releaseJob{b, batch})
	}
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-b.e.ctx.Done():
		select {
		case <-w.done: // answered as Close came
			return w.res, w.err
		default:
			return 0, ErrClosed
		}
	}
}

// takeLocked takes up to MaxBatch pending requests; b.mu is held.
func (b *releaseBatch) takeLocked() []*releaseWait {
	n := min(len(b.pending), b.e.caps.MaxBatch)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil // lets the taken batch's array go with it
	}
	return batch
}

// next takes the batch that gathered while one was in flight, or marks
// the batcher idle and returns nil.
func (b *releaseBatch) next() []*releaseWait {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.sending = false
		return nil
	}
	return b.takeLocked()
}

// send makes one Release call for batch and hands each request its result.
func (b *releaseBatch) send(batch []*releaseWait) {
	reqs := make([]driver.ReleaseRequest, len(batch))
	for i, w := range batch {
		reqs[i] = w.req
	}
	res, err := b.e.drv.Release(valuesOf{batch[0].ctx, b.e.ctx}, reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("driver answered %d results for %d releases", len(res), len(reqs))
	}
	for i, w := range batch {
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
	batch []*releaseWait
}

func (j *releaseJob) run() {
	defer j.b.e.ops.Done()
	for batch := j.batch; batch != nil; batch = j.b.next() {
		j.b.send(batch)
	}
}

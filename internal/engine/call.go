package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// call runs f, a driver call on behalf of a caller's ctx, so that it
// returns when ctx ends or the engine closes, whatever the driver's client
// was configured to honour.
//
// A driver that is not ContextAware (go-redis without ContextTimeoutEnabled
// ignores deadlines, and no go-redis client aborts a read on cancellation)
// is called on another goroutine (callers.go), which call abandons when ctx
// ends or the engine closes first. The abandoned call still completes; late,
// if set, then sees its outcome — an acquisition uses it to release a lock
// that nobody will use. Abandoned calls count as ops, so Close waits for
// them before the application closes the store client under them.
//
// There, f's context is the pending call itself: the caller's values and
// deadline, done once the caller abandons the call, so that what the store
// client does honour (waiting for a pooled connection, dialing) ends then.
// Deriving a context that ends with either the caller's or the engine's
// would cost allocations on every call (docs/benchmarks.md).
func call[T any](e *Engine, ctx context.Context, f func(context.Context) (T, error), late func(T, error)) (T, error) {
	if ctx.Done() == nil {
		// Only Close can interrupt this call: use the engine's context, with
		// the caller's values.
		return f(valuesOf{ctx, e.ctx})
	}
	if e.caps.ContextAware {
		ctx, stop := e.bind(ctx)
		defer stop()
		return f(ctx)
	}
	p := &pending[T]{f: f, late: late, done: make(chan outcome[T], 1), ops: &e.ops}
	p.callContext = newCallContext(ctx, true)
	e.ops.Add(1) // the caller holds an op, so Close cannot be waiting yet
	e.callers.run(p)
	var cause error
	select {
	case o := <-p.done:
		return o.v, o.err
	case <-ctx.Done():
		cause = context.Cause(ctx)
	case <-e.ctx.Done():
		cause = ErrClosed
	}
	if p.state.CompareAndSwap(0, 2) {
		p.abandon(ctx.Err())
		var zero T
		return zero, cause
	}
	o := <-p.done // answered just now
	return o.v, o.err
}

// pending is a driver call that call runs on a caller goroutine, and the
// context the call gets.
type pending[T any] struct {
	callContext
	f    func(context.Context) (T, error)
	late func(T, error)
	done chan outcome[T] // buffered: the answer never waits for the caller
	ops  *sync.WaitGroup
	// state: 0 running, 1 answered, 2 abandoned. Whoever moves it first
	// owns the outcome.
	state atomic.Int32
}

type outcome[T any] struct {
	v   T
	err error
}

func (p *pending[T]) run() {
	defer p.ops.Done()
	v, err := p.f(&p.callContext)
	if p.state.CompareAndSwap(0, 1) {
		p.done <- outcome[T]{v, err}
		return
	}
	if p.late != nil {
		p.late(v, err)
	}
}

// callContext is the context of a driver call that runs on a caller
// goroutine for callers who may stop waiting for it (call, and a batch of
// several: batch.go): a caller's values, and its deadline if the call is
// that caller's alone, done once the call is abandoned. Done, and not a
// context derived from each caller's and the engine's, which would cost
// allocations on every call.
type callContext struct {
	values    context.Context
	deadline  bool          // whether Deadline is that of values
	abandoned chan struct{} // closed, after err is set, by abandon
	err       error
}

func newCallContext(values context.Context, deadline bool) callContext {
	return callContext{values: values, deadline: deadline, abandoned: make(chan struct{})}
}

// abandon makes the context done, with err (the caller's ctx.Err(), or nil
// when the engine closes: then context.Canceled). Called once.
func (c *callContext) abandon(err error) {
	if err == nil {
		err = context.Canceled
	}
	c.err = err
	close(c.abandoned)
}

func (c *callContext) Done() <-chan struct{} { return c.abandoned }
func (c *callContext) Value(key any) any     { return c.values.Value(key) }

func (c *callContext) Deadline() (time.Time, bool) {
	if !c.deadline {
		return time.Time{}, false
	}
	return c.values.Deadline()
}

func (c *callContext) Err() error {
	select {
	case <-c.abandoned:
		return c.err
	default:
		return nil
	}
}

// bind returns ctx, also cancelled (with ErrClosed) when the engine closes.
func (e *Engine) bind(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(e.ctx, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// valuesOf is a context with the values of one context and the
// cancellation of another; it saves allocating a merged context on the
// hot path, where the caller's context cannot be cancelled.
type valuesOf struct {
	values context.Context
	cancel context.Context
}

func (c valuesOf) Deadline() (time.Time, bool) { return c.cancel.Deadline() }
func (c valuesOf) Done() <-chan struct{}       { return c.cancel.Done() }
func (c valuesOf) Err() error                  { return c.cancel.Err() }
func (c valuesOf) Value(key any) any           { return c.values.Value(key) }

// Call runs f, a driver call made for the caller (an operator function,
// say), so that it returns when ctx ends, as every engine call does. It
// returns ErrClosed once the engine is closing.
func Call[T any](e *Engine, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	if !e.beginOp() {
		var zero T
		return zero, ErrClosed
	}
	defer e.ops.Done()
	return call(e, ctx, f, nil)
}

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
	p := &pending[T]{caller: ctx, f: f, late: late, done: make(chan outcome[T], 1), abandoned: make(chan struct{}), ops: &e.ops}
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
		p.err = ctx.Err()
		if p.err == nil {
			p.err = context.Canceled // by Close
		}
		close(p.abandoned)
		var zero T
		return zero, cause
	}
	o := <-p.done // answered just now
	return o.v, o.err
}

// pending is a driver call that call runs on a caller goroutine, and the
// context the call gets.
type pending[T any] struct {
	caller    context.Context
	f         func(context.Context) (T, error)
	late      func(T, error)
	done      chan outcome[T] // buffered: the answer never waits for the caller
	abandoned chan struct{}   // closed, after err is set, when the caller gives up
	err       error
	ops       *sync.WaitGroup
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
	v, err := p.f(p)
	if p.state.CompareAndSwap(0, 1) {
		p.done <- outcome[T]{v, err}
		return
	}
	if p.late != nil {
		p.late(v, err)
	}
}

// The context.Context of the call: the caller's values and deadline, done
// when the caller abandons the call.

func (p *pending[T]) Deadline() (time.Time, bool) { return p.caller.Deadline() }
func (p *pending[T]) Done() <-chan struct{}       { return p.abandoned }
func (p *pending[T]) Value(key any) any           { return p.caller.Value(key) }

func (p *pending[T]) Err() error {
	select {
	case <-p.abandoned:
		return p.err
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

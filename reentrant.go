package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/internal/engine"
)

// Reentrancy through the context.
//
// Go has no thread identity, so a lock cannot know that "the same thread"
// asks again, and guessing from goroutine ids is wrong: work moves between
// goroutines, and one goroutine may serve unrelated requests. What a Go
// program does carry from caller to callee is a context. So a Lock or
// TryLock whose ctx descends from the Context of a live lease of the same
// Client on the same key is that lease's caller asking again: a nested
// hold. It costs no round trip, has the same fencing token (the holder is
// the same; a new token would make the resource reject the outer holder's
// writes), and ends when the outer lease ends. The lock is released only
// when the outermost lease is.
//
// The lease's Context carries a *mark (under markKey) naming the Client,
// the lease and, through parent, the marks of the leases its own Lock ctx
// descended from, so a lookup walks a short list: ctx.Value(markKey{}) on
// the non-nested path finds nothing and allocates nothing.

// ErrReentry is returned by Lock, TryLock, LockAll and TryLockAll when ctx
// descends from a live lease of the same Client on one of the keys and
// re-entry is refused: by WithoutReentry on the call or on the enclosing
// lease, or always for LockAll and TryLockAll (they do not nest). Waiting
// instead would wait forever for a lock the caller itself holds.
var ErrReentry = errors.New("dlock: re-entry refused: the lock is held by a lease this context descends from")

// WithoutReentry refuses re-entry: this call fails with ErrReentry instead
// of nesting when its ctx descends from a live lease of the same Client on
// the same key, and the lease it returns refuses every nested Lock or
// TryLock the same way (a non-reentrant lock). It never makes a call wait
// for a lock its caller holds.
func WithoutReentry() LockOption {
	return func(c *lockConfig) error { c.noReentry = true; return nil }
}

// markKey is the context key of a lease's mark.
type markKey struct{}

// mark is what a lease's Context carries for re-entry.
type mark struct {
	c         *Client
	parent    *mark       // the innermost mark of the ctx the lease was taken with
	lease     *Lease      // the lease, or
	multi     *MultiLease // the multi-key lease
	noReentry bool
	nested    atomic.Int32 // nested holds not yet unlocked
}

// marks returns the innermost mark ctx carries, or nil.
func marks(ctx context.Context) *mark {
	m, _ := ctx.Value(markKey{}).(*mark)
	return m
}

// holdFor returns the hold of key if m's lease covers key.
func (m *mark) holdFor(key string) *engine.Hold {
	if m.lease != nil {
		if m.lease.a.Key() == key {
			return m.lease.a
		}
		return nil
	}
	return m.multi.holdFor(key)
}

func (m *mark) context() context.Context {
	if m.lease != nil {
		return m.lease.Context()
	}
	return m.multi.Context()
}

func (m *mark) err() error {
	if m.lease != nil {
		return m.lease.a.Err()
	}
	return m.multi.Err()
}

func (m *mark) owner() Owner {
	if m.lease != nil {
		return m.lease.owner
	}
	return m.multi.owner
}

// holds is Lease.Holds and MultiLease.Holds.
func (m *mark) holds() int {
	if m.err() != nil {
		return 0
	}
	return 1 + int(m.nested.Load())
}

// enclosing returns the innermost mark from head on of a live lease of c
// covering key, and its hold of key.
func (c *Client) enclosing(head *mark, key string) (*mark, *engine.Hold) {
	for m := head; m != nil; m = m.parent {
		if m.c != c {
			continue
		}
		if h := m.holdFor(key); h != nil {
			if m.err() != nil {
				// Ended: ctx only carries its values (a Lock under it
				// would have found ctx done); a new acquisition it is.
				return nil, nil
			}
			return m, h
		}
	}
	return nil, nil
}

// reenter makes a Lock or TryLock of key under ctx a nested hold if ctx
// descends from a live lease of c on key; ok reports whether it applies.
func (c *Client) reenter(ctx context.Context, head *mark, key string, lc lockConfig) (l *Lease, ok bool, err error) {
	m, h := c.enclosing(head, key)
	if m == nil {
		return nil, false, nil
	}
	if lc.noReentry || m.noReentry {
		return nil, true, fmt.Errorf("%w: %q", ErrReentry, key)
	}
	if err := ctx.Err(); err != nil {
		return nil, true, fmt.Errorf("dlock: lock %q: %w", key, err)
	}
	n := &nested{outer: m, marks: head}
	// A child of the outer's Context: when the outer ends, the nested
	// hold ends with it, in the same call, with the same cause.
	n.ctx, n.cancel = context.WithCancelCause(m.context())
	m.nested.Add(1)
	return &Lease{lease[*engine.Hold]{a: h, c: c, owner: m.owner(), nest: n}}, true, nil
}

// nested is the state of a nested hold.
type nested struct {
	outer  *mark
	marks  *mark // the innermost mark of the nested Lock's ctx
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	unlocked bool
	answer   error
}

func (n *nested) err() error {
	if err := context.Cause(n.ctx); err != nil {
		return err
	}
	if err := n.outer.err(); err != nil {
		// The outer ended (at its deadline, say) and its cancellation has
		// not reached n.ctx yet: make Done closed before Err reports.
		n.cancel(err)
		return context.Cause(n.ctx)
	}
	return nil
}

// unlock ends the nested hold, once; the outer lease is left as it is.
func (n *nested) unlock(ctx context.Context) error {
	_ = n.err() // an outer lease past its deadline ends as lost first
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.unlocked {
		return n.answer
	}
	n.unlocked = true
	n.outer.nested.Add(-1)
	switch cause := context.Cause(n.ctx); {
	case cause == nil, errors.Is(cause, ErrReleased):
		n.answer = nil
	case errors.Is(cause, ErrLockLost):
		n.answer = ErrNotHeld
	default:
		n.answer = cause // ErrClosed
	}
	n.cancel(ErrReleased)
	if ctx == nil {
		return fmt.Errorf("%w: unlock: nil context (the nested hold ended)", ErrInvalidArgument)
	}
	return n.answer
}

// leaseContext is Lease.Context and MultiLease.Context: the engine's
// context of the acquisition, carrying the mark that Lock under it finds
// (see marks). Generic, so that it stays one pointer wide and returning it
// allocates nothing.
type leaseContext[A acquisition] struct{ l *lease[A] }

func (c leaseContext[A]) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c leaseContext[A]) Done() <-chan struct{}       { return c.l.a.Context().Done() }
func (c leaseContext[A]) Err() error                  { return c.l.a.Context().Err() }

func (c leaseContext[A]) Value(key any) any {
	if _, ok := key.(markKey); ok {
		return &c.l.m
	}
	return c.l.a.Context().Value(key)
}

// nestedContext is a nested hold's Context: a child of the outer lease's
// Context (its values and cancellation), whose Err checks the outer's
// deadline, and whose mark is the nested Lock ctx's, so a Lock of another
// key under it still finds every lease that ctx descended from.
type nestedContext struct{ n *nested }

func (c nestedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c nestedContext) Done() <-chan struct{}       { return c.n.ctx.Done() }

func (c nestedContext) Err() error {
	if c.n.err() != nil {
		return context.Canceled
	}
	return nil
}

func (c nestedContext) Value(key any) any {
	if _, ok := key.(markKey); ok {
		return c.n.marks
	}
	return c.n.ctx.Value(key)
}

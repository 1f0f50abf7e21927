package election

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockio/dlock"
)

// Leadership is one term of this process as leader. Its context ends when
// the term does. It is safe for concurrent use.
type Leadership struct {
	lease  *dlock.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	margin time.Duration
	done   chan struct{} // closed when the step-down watcher has exited
	// changed wakes the Election's observers; it never blocks.
	changed func()

	resignOnce sync.Once
	resignErr  error
}

func newLeadership(lease *dlock.Lease, margin time.Duration, changed func()) *Leadership {
	inner, cancel := context.WithCancelCause(lease.Context())
	ctx := termContext{Context: inner, cancel: cancel, lease: lease, margin: margin}
	l := &Leadership{lease: lease, ctx: ctx, cancel: cancel, margin: margin, done: make(chan struct{}), changed: changed}
	go l.watch()
	return l
}

// watch ends the term margin before the lease's validity deadline unless a
// renewal has moved the deadline on by then. It only cancels a context and
// wakes observers without blocking, so nothing here can delay the end of
// the lease.
func (l *Leadership) watch() {
	defer close(l.done)
	defer l.changed()
	for {
		left := time.Until(l.lease.Deadline()) - l.margin
		if left <= 0 {
			l.cancel(ErrSteppedDown)
			return
		}
		t := time.NewTimer(left)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Term returns the term: the lease's fencing token, strictly greater than
// the term of every earlier leader. Pass it to guarded writes.
func (l *Leadership) Term() uint64 { return l.lease.Token() }

// Deadline returns the lease's current validity deadline; the term's
// context ends the step-down margin before it unless a renewal moves it.
func (l *Leadership) Deadline() time.Time { return l.lease.Deadline() }

// Context returns a context that ends when the term ends: on Resign, on
// the lease's end (lost, Client closed), or when renewals stalled until
// only the step-down margin was left. Its cause (context.Cause) says which:
// ErrResigned, ErrSteppedDown, or the lease's error (dlock.ErrLockLost...).
func (l *Leadership) Context() context.Context { return l.ctx }

// Done returns a channel closed when the term ends.
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the term lasts, then its cause (see Context).
func (l *Leadership) Err() error {
	// The term's context asks the lease and the clock itself, so a term
	// never reports "leading" past its lease (or into its step-down
	// margin), however late goroutines run.
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Resign ends the term: its context ends first (cause ErrResigned, unless
// it had ended already), then the lock is released so the next candidate
// can win at once. Stop the leader's work before calling it — Run does.
// It returns the release's error: nil, dlock.ErrNotHeld when the lease had
// been lost already, or a store failure (the lock then expires with its
// TTL). Calling it again returns the same answer.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() {
		l.cancel(ErrResigned)
		<-l.done
		if ctx == nil {
			ctx = context.Background()
		}
		l.resignErr = l.lease.Unlock(ctx)
		l.changed()
		if errors.Is(l.resignErr, dlock.ErrNotHeld) {
			l.resignErr = dlock.ErrNotHeld
		}
	})
	return l.resignErr
}

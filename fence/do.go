package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock"
)

// Locker takes locks. *dlock.Client is one.
type Locker interface {
	Lock(ctx context.Context, key string, opts ...dlock.LockOption) (*dlock.Lease, error)
}

// Func is the work done under a lock. Its ctx ends when the caller's ctx
// ends or the lease ends, whichever comes first (context.Cause tells which:
// dlock.ErrLockLost when the lock was lost); tok is the lease's fencing
// token, to pass to every guarded write.
type Func func(ctx context.Context, tok Token) error

// Do takes the lock key with l, waiting as long as ctx allows (opts are
// passed to Lock), runs fn under it, and releases the lock — also when fn
// panics.
//
// Do returns Lock's error if the lock was not taken (fn is not called);
// otherwise fn's error, unless the lease ended while fn ran, in which case
// the error matches dlock.ErrLockLost (or dlock.ErrClosed when the Client
// was closed) and also fn's error, if any. "Ended while fn ran" means the
// lease reported its end before fn returned, or the release found that the
// lock had already been taken over. A nil return therefore means fn returned
// nil while the lease was held as far as dlock can tell; fencing is what
// covers the rest (a pause the holder could not see).
//
// A release that fails after fn succeeded is not reported: the lease has
// ended either way and the lock expires with its TTL. When ctx is done by
// then, the release is made in the background (see Lease.Unlock).
func Do(ctx context.Context, l Locker, key string, fn Func, opts ...dlock.LockOption) (err error) {
	if c, isClient := l.(*dlock.Client); l == nil || isClient && c == nil {
		return fmt.Errorf("%w: nil locker", dlock.ErrInvalidArgument)
	}
	if fn == nil {
		return fmt.Errorf("%w: nil function", dlock.ErrInvalidArgument)
	}
	lease, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	defer func() {
		uerr := lease.Unlock(ctx)
		if errors.Is(uerr, dlock.ErrNotHeld) && !errors.Is(err, errLeaseEnded) {
			// The lease had not noticed, but the store had given the lock to
			// someone else: fn may have overlapped with that holder.
			err = ended(key, fmt.Errorf("%w: the release found the lock taken over", dlock.ErrLockLost), err)
		}
	}()
	return Run(ctx, lease, fn)
}

// Run runs fn under lease, which it does not release: for callers that
// manage the lease themselves (several steps under one lock, a leader's
// term). fn's ctx ends when ctx ends or the lease ends. Run returns an error
// matching the lease's end (dlock.ErrLockLost, dlock.ErrReleased,
// dlock.ErrClosed) without calling fn when the lease has already ended;
// otherwise as Do.
func Run(ctx context.Context, lease *dlock.Lease, fn Func) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument)
	case lease == nil:
		return fmt.Errorf("%w: nil lease", dlock.ErrInvalidArgument)
	case fn == nil:
		return fmt.Errorf("%w: nil function", dlock.ErrInvalidArgument)
	}
	if err := lease.Err(); err != nil {
		return fmt.Errorf("fence: the lease on %q had ended before the function ran: %w", lease.Key(), err)
	}
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The lease's end cancels fn's context. The callback only cancels, so
	// nothing here can delay the end of the lease.
	stop := context.AfterFunc(lease.Context(), func() { cancel(context.Cause(lease.Context())) })
	defer stop()

	err := fn(runContext{inner: inner, cancel: cancel, lease: lease}, lease.Token())
	if lerr := lease.Err(); lerr != nil {
		return ended(lease.Key(), lerr, err)
	}
	return err
}

// errLeaseEnded marks the errors made by ended.
var errLeaseEnded = errors.New("fence: the lease ended while the function ran")

// ended reports that the lease on key ended (cause) while fn ran, keeping
// fn's own error, if any, reachable with errors.Is and errors.As.
func ended(key string, cause, fnErr error) error {
	if fnErr != nil {
		return fmt.Errorf("%w on %q: %w; the function returned: %w", errLeaseEnded, key, cause, fnErr)
	}
	return fmt.Errorf("%w on %q: %w", errLeaseEnded, key, cause)
}

// runContext is fn's context: the caller's values and cancellation plus the
// lease's end, with an Err that, like Lease.Context's, compares the clock
// with the lease's deadline on every call instead of waiting for the
// renewal goroutine to notice. Value forwards to the inner context, so
// context.Cause and child contexts see its cancelCtx and cause.
type runContext struct {
	inner  context.Context
	cancel context.CancelCauseFunc
	lease  *dlock.Lease
}

func (c runContext) Deadline() (time.Time, bool) { return c.inner.Deadline() }
func (c runContext) Done() <-chan struct{}       { return c.inner.Done() }
func (c runContext) Value(key any) any           { return c.inner.Value(key) }

func (c runContext) Err() error {
	if err := c.lease.Err(); err != nil {
		// Closes Done before Err reports, as contexts promise; a no-op once
		// cancelled.
		c.cancel(err)
	}
	return c.inner.Err()
}

package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
)

// The outcome errors. Package dlock exports them under its own names (and
// documents them there); they live here so that the engine can return them
// without importing dlock.
var (
	ErrNotAcquired = errors.New("dlock: lock not acquired: held by another owner")
	ErrNotHeld     = errors.New("dlock: lock not held")
	ErrLost        = errors.New("dlock: lock lost")
	ErrReleased    = errors.New("dlock: lock released")
	ErrClosed      = errors.New("dlock: client closed")
	ErrBackend     = errors.New("dlock: backend failure")
)

// The ends of a lost lease, by cause: each matches ErrLost and says why,
// so that a holder can tell a store that took the lock away (a forced
// release, an expiry there, lost data) from one it could not reach in time.
// Made once: ending a lease allocates nothing for its error.
var (
	errLostNotHeld  = fmt.Errorf("%w: the store no longer had it as this lease's (released by force, expired there, or lost with the store's data)", ErrLost)
	errLostDeadline = fmt.Errorf("%w: its validity deadline passed before the store confirmed a renewal", ErrLost)
	errLostGroup    = fmt.Errorf("%w: another lock taken with it was lost", ErrLost)
)

// lostError is the end reason of a lease lost for why (LostNotHeld,
// LostDeadline or LostGroup).
func lostError(why string) error {
	switch why {
	case LostNotHeld:
		return errLostNotHeld
	case LostGroup:
		return errLostGroup
	}
	return errLostDeadline
}

// errTooSlow: the store granted the lock, but its reply arrived after the
// lease's validity deadline.
var errTooSlow = errors.New("reply arrived after the lease's validity deadline")

// backendError wraps a driver failure so it matches ErrBackend and still
// unwraps to the driver's own error (a net.Error, say).
type backendError struct {
	op  string
	key string
	err error
}

func (e *backendError) Error() string {
	return fmt.Sprintf("dlock: %s %q: backend failure: %v", e.op, e.key, e.err)
}

func (e *backendError) Unwrap() []error { return []error{ErrBackend, e.err} }

// WrapBackend classifies a driver error: invalid arguments stay invalid
// arguments (driver.ErrInvalid is dlock.ErrInvalidArgument), everything else
// is a backend failure. Its callers have checked that the caller's ctx did
// not end, so a context error here is a store client's own timeout or
// cancellation (the etcd driver's request timeout, say): it keeps its text
// but no longer matches context.DeadlineExceeded or context.Canceled,
// which would tell the caller its own ctx ended.
func WrapBackend(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, driver.ErrInvalid) {
		return fmt.Errorf("dlock: %s %q: %w", op, key, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = storeTimeout{err.Error()}
	}
	return &backendError{op: op, key: key, err: err}
}

// storeTimeout is a context error of the store client's own, not the
// caller's: its text without its identity.
type storeTimeout struct{ text string }

func (e storeTimeout) Error() string {
	return "the store client's own deadline or cancellation: " + e.text
}

// ctxError reports a call that ended because its context did; the error
// matches ctx.Err() (and context.Cause when it differs).
func ctxError(op, key string, cause error) error {
	return fmt.Errorf("dlock: %s %q: %w", op, key, cause)
}

package dlock

import (
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
)

// Sentinel errors. Every error dlock returns matches at most one of the
// outcome errors below with errors.Is, so callers can tell "busy" from
// "backend down" from "cancelled" (the latter matches ctx.Err()).
var (
	// ErrNotAcquired: TryLock found the lock held by someone else.
	ErrNotAcquired = errors.New("dlock: lock not acquired: held by another owner")
	// ErrNotHeld: Unlock found the lock no longer ours (it expired, was
	// force-released, or was taken over). The other holder's lock is intact.
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrLockLost: the lease ended without Unlock — the store said the lock
	// is no longer ours, or the validity deadline passed without a renewal.
	ErrLockLost = errors.New("dlock: lock lost")
	// ErrReleased: the lease ended because its holder called Unlock.
	ErrReleased = errors.New("dlock: lock released")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("dlock: client closed")
	// ErrBackend: the store could not be reached or failed. The wrapped error
	// carries the driver's cause.
	ErrBackend = errors.New("dlock: backend failure")
	// ErrInvalidArgument is matched by every input-validation error.
	ErrInvalidArgument = errors.New("dlock: invalid argument")
	// ErrInvalidKey: empty, too long, or unusable lock name.
	ErrInvalidKey = fmt.Errorf("%w: key", ErrInvalidArgument)
	// ErrInvalidTTL: TTL below MinTTL, or otherwise unusable.
	ErrInvalidTTL = fmt.Errorf("%w: ttl", ErrInvalidArgument)
)

// backendError wraps a driver failure so it matches ErrBackend and still
// unwraps to the driver's own error (e.g. a net.Error).
type backendError struct {
	op  string
	key string
	err error
}

func (e *backendError) Error() string {
	return fmt.Sprintf("dlock: %s %q: backend failure: %v", e.op, e.key, e.err)
}

func (e *backendError) Unwrap() []error { return []error{ErrBackend, e.err} }

func wrapBackend(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, driver.ErrInvalid) {
		return fmt.Errorf("%w: %s %q: %v", ErrInvalidArgument, op, key, err)
	}
	return &backendError{op: op, key: key, err: err}
}

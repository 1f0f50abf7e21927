package dlock

import (
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// Sentinel errors. Every error dlock returns matches at most one of the
// outcome errors below with errors.Is, so callers can tell "busy" from
// "backend down" from "cancelled" (the latter matches ctx.Err()).
var (
	// ErrNotAcquired: TryLock found the lock held by someone else.
	ErrNotAcquired = engine.ErrNotAcquired
	// ErrNotHeld: Unlock found the lock no longer ours (it expired, was
	// force-released, or was taken over). The other holder's lock is intact.
	ErrNotHeld = engine.ErrNotHeld
	// ErrLockLost: the lease ended without Unlock — the store said the lock
	// is no longer ours, or the validity deadline passed without a renewal.
	// A lease's Err wraps it with which of the two (or, for a MultiLease,
	// that another of its locks was lost): match it with errors.Is.
	ErrLockLost = engine.ErrLost
	// ErrReleased: the lease ended because its holder called Unlock.
	ErrReleased = engine.ErrReleased
	// ErrClosed: the Client was closed.
	ErrClosed = engine.ErrClosed
	// ErrBackend: the store could not be reached or failed. The wrapped error
	// carries the driver's cause.
	ErrBackend = engine.ErrBackend
	// ErrUpgrade: the write lock of a name (RWMutex.Lock, Client.Lock) was
	// asked for, on the Client that holds it, under a context derived from
	// a read lease of that name that is still held — an upgrade, which
	// would wait for that reader forever. Release the read lease first (see
	// RWMutex.Lock). Another Client is not checked: it waits like any other
	// process.
	ErrUpgrade = errors.New("dlock: write lock requested under a read lease of the same name (upgrade)")
	// ErrUnsupported: the driver does not offer the operation (for example
	// Inspect on a driver without operator functions, or the fair lock on
	// one without a queue). It matches errors.ErrUnsupported too.
	ErrUnsupported = fmt.Errorf("dlock: not supported by this driver (%w)", errors.ErrUnsupported)
	// ErrInvalidArgument is matched by every input-validation error. It is
	// the same value as driver.ErrInvalid, which drivers return.
	ErrInvalidArgument = driver.ErrInvalid
	// ErrInvalidKey: empty, too long, or unusable lock name.
	ErrInvalidKey = fmt.Errorf("%w: key", ErrInvalidArgument)
	// ErrInvalidTTL: TTL below the driver's minimum, or otherwise unusable.
	ErrInvalidTTL = fmt.Errorf("%w: ttl", ErrInvalidArgument)
	// ErrQueueFull: a queued acquisition (the fair Lock, RWMutex,
	// Semaphore) that had to wait found as many waiters in the name's queue
	// as WithMaxWaiters (or WithDefaultMaxWaiters) allows, and was not
	// queued. The error matches ErrNotAcquired too: the name is busy, and
	// the store answered; it is not a backend failure. It is the same value
	// as driver.ErrQueueFull, which drivers return.
	ErrQueueFull = driver.ErrQueueFull
	// ErrLimitMismatch: a Semaphore's permit was asked for with another N
	// than the permits held or waited for on that name were (see
	// Semaphore). It matches ErrInvalidArgument, and is the same value as
	// driver.ErrLimitMismatch.
	ErrLimitMismatch = driver.ErrLimitMismatch
)

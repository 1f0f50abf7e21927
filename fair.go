package dlock

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// WithFIFO makes Lock wait in a queue kept by the store, in the order of
// arrival at the store, with direct hand-off (see docs/fair-lock.md): a
// release grants the lock to the first waiter in the same atomic step,
// with the next fencing token, and wakes only that waiter. A waiter's
// place is a lease of its own, renewed while it waits: a waiter that dies
// drops out within one TTL, a live one is never passed over. Lock returns
// an error matching ErrUnsupported on a driver without queued leases.
//
// TryLock accepts it too: one attempt through the queue, refused while
// anyone waits (a plain TryLock is refused then as well).
//
// Fair and plain acquisitions of a key exclude each other, share one
// fencing-token sequence, and a plain TryLock or Lock never takes a key
// ahead of its queued waiters. A handed-off lease's validity deadline is
// its waiter place's (see docs/fair-lock.md); with WithoutWatchdog it is
// therefore what the place had left, not a fresh TTL.
//
// It is not the default: uncontended, it measured the same time per cycle
// as a plain Lock but more Redis time than the 5 % the default would allow
// (docs/fair-lock.md has the numbers).
func WithFIFO() LockOption {
	return func(c *lockConfig) error { c.fifo = fifoOn; return nil }
}

// fifoMode is lockConfig.fifo.
type fifoMode uint8

const (
	fifoDefault fifoMode = iota // the Client's default: plain
	fifoOn
)

// acquireFIFO acquires req through the store's queue: waiting its turn,
// or with try granted iff nobody waits and the key is free.
func (c *Client) acquireFIFO(ctx context.Context, req driver.AcquireRequest, lc lockConfig, try bool) (*engine.Hold, error) {
	if !c.e.SupportsQueue() {
		return nil, fmt.Errorf("%w: FIFO lock of %q: the driver has no queued leases", ErrUnsupported, req.Key)
	}
	qreq := driver.QueueRequest{Key: req.Key, TTL: req.TTL, Owner: req.Owner, Mode: driver.ModeExclusive}
	if try {
		return c.e.TryAcquireQueued(ctx, qreq, lc.watchdog)
	}
	return c.e.AcquireQueued(ctx, qreq, lc.watchdog)
}

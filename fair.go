package dlock

import (
	"context"

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
// It is the default of Lock on the Redis, etcd and in-memory drivers,
// whose queued acquisition costs what a plain one does when uncontended
// (docs/benchmarks.md); WithoutFIFO opts out.
//
// TryLock accepts it too: one attempt through the queue, refused while
// anyone waits (a plain TryLock is refused then as well, so without the
// option TryLock takes the plain path, which is the same decision).
//
// Fair and plain acquisitions of a key exclude each other, share one
// fencing-token sequence, and a plain TryLock or Lock never takes a key
// ahead of its queued waiters. A handed-off lease's validity deadline is
// its waiter place's (see docs/fair-lock.md), renewed from there; a fixed
// lease (WithoutWatchdog) is asked for once more on a hand-off, one round
// trip, so that it is valid for a full TTL from then.
func WithFIFO() LockOption {
	return func(c *lockConfig) error { c.fifo = fifoOn; return nil }
}

// WithoutFIFO makes Lock wait the plain way even where FIFO is the
// default: woken by the holder's release notification (or its TTL), then
// racing every other waiter for the key, with no queue in the store. It
// never overtakes queued waiters of the key, though: a plain acquisition
// of a name with a queue is refused until the queue is served.
func WithoutFIFO() LockOption {
	return func(c *lockConfig) error { c.fifo = fifoOff; return nil }
}

// fifoMode is lockConfig.fifo.
type fifoMode uint8

const (
	fifoDefault fifoMode = iota // the driver's default (Capabilities.QueueByDefault)
	fifoOn
	fifoOff
)

// queued reports whether an acquisition with lc goes through the store's
// queue: WithFIFO, or Lock by default on a driver that queues by default.
func (c *Client) queued(lc lockConfig, try bool) bool {
	switch lc.fifo {
	case fifoOn:
		return true
	case fifoDefault:
		return !try && c.caps.QueueByDefault && c.queues
	}
	return false
}

// acquireFIFO acquires req through the store's queue: waiting its turn,
// or with try granted iff nobody waits and the key is free. Only called
// when queued said so, which lock checked against the driver.
func (c *Client) acquireFIFO(ctx context.Context, req driver.AcquireRequest, lc lockConfig, try bool) (*engine.Hold, error) {
	h, err := c.e.Acquire(ctx, c.queuedRequest(req, driver.ModeExclusive, 0, lc, !try))
	if try {
		return h, err
	}
	return h, queueRefusal("lock", req.Key, err)
}

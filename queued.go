package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
)

// The read-write lock and the semaphore are one mechanism in the store: a
// queue per name, holders each with its own lease, in a mode. This file
// turns their calls into queued acquisitions through the engine.

// mode is what a queued acquisition asks for.
type mode uint8

const (
	modeExclusive mode = iota + 1 // a write lease of a read-write lock, or the plain lock
	modeShared                    // a read lease
	modePermit                    // one of limit permits
)

func (m mode) String() string {
	switch m {
	case modeExclusive:
		return "write lock"
	case modeShared:
		return "read lock"
	case modePermit:
		return "permit"
	}
	return "mode?"
}

// queued is one queued acquisition call.
type queued struct {
	name  string
	mode  mode
	limit int  // permits, for modePermit
	wait  bool // wait for a turn; else one attempt
}

// Requests under a lease's Context (reentrant.go): a request of a name
// under a live lease of the same Client on that name would wait for that
// lease, whatever it asks for, except a permit under a permit. So:
//
//	under \ asked for    lock, write lease     read lease    permit
//	write lease or lock   nested                nested        ErrReentry
//	read lease            ErrUpgrade            nested        ErrReentry
//	permit                ErrReentry            ErrReentry    a new permit
//
// A nested hold is a re-entry like any other: no round trip, the same
// token, ended with the outer lease.

// refuseNested returns the error of the table above for a request of key
// in mode m under ctx, or nil when it may nest or proceed.
func (c *Client) refuseNested(ctx context.Context, key string, m mode) error {
	enc, h := c.enclosing(marks(ctx), key)
	if enc == nil {
		return nil
	}
	switch {
	case h.Kind() == driver.KindPermit && m == modePermit:
		return nil
	case h.Kind() == driver.KindPermit, m == modePermit:
		return fmt.Errorf("%w: a %s of %q under a %s of that name", ErrReentry, m, key, kindName(h.Kind()))
	case h.Kind() == driver.KindRead && m != modeShared:
		return fmt.Errorf("dlock: %q requested under its own read lease (token %d): %w", key, h.Token(), ErrUpgrade)
	}
	return nil
}

func kindName(k driver.Kind) string {
	switch k {
	case driver.KindRead:
		return "read lease"
	case driver.KindPermit:
		return "permit"
	}
	return "lock"
}

// acquireQueued validates q and its options, handles a request nested
// under a lease of the name (above), and makes the acquisition.
func (c *Client) acquireQueued(ctx context.Context, q queued, opts []LockOption) (*Lease, error) {
	req, lc, err := c.prepare(ctx, q.name, opts)
	if err != nil {
		return nil, err
	}
	if err := c.refuseNested(ctx, q.name, q.mode); err != nil {
		return nil, err
	}
	head := marks(ctx)
	if q.mode != modePermit {
		if l, ok, err := c.reenter(ctx, head, q.name, lc); ok {
			return l, err
		}
	}
	l, err := c.sendQueued(ctx, q, req, lc, head)
	return l, queueRefusal(q.mode.String(), q.name, err)
}

// maxWaiters is the queue cap of an acquisition with lc: WithMaxWaiters,
// else the Client's WithDefaultMaxWaiters.
func (c *Client) maxWaiters(lc lockConfig) int {
	if lc.maxWaiters != nil {
		return *lc.maxWaiters
	}
	return c.cfg.maxWaiters
}

// queueRefusal returns err, of a queued acquisition (what) of name, with a
// full queue told apart. The engine reports every driver error that is not
// invalid input as a backend failure; a full queue is none: the store
// answered that the name is busy and has as many waiters as the caller
// accepts, so it matches ErrQueueFull and ErrNotAcquired, not ErrBackend.
func queueRefusal(what, name string, err error) error {
	if err == nil || !errors.Is(err, ErrQueueFull) {
		return err
	}
	return fmt.Errorf("dlock: %s %q: %w (%w)", what, name, ErrQueueFull, ErrNotAcquired)
}

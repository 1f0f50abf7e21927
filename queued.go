package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// The read-write lock and the semaphore are one mechanism in the store: a
// queue per name, holders each with its own lease, in a mode. This file
// turns their calls into queued acquisitions through the engine.

// modeName names a queued acquisition of mode m in errors.
func modeName(m driver.Mode) string {
	switch m {
	case driver.ModeShared:
		return "read lock"
	case driver.ModePermit:
		return "permit"
	}
	return "write lock"
}

// queued is one queued acquisition call.
type queued struct {
	name  string
	mode  driver.Mode
	limit int  // permits, for ModePermit
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
func (c *Client) refuseNested(ctx context.Context, key string, m driver.Mode) error {
	enc, h := c.enclosing(marks(ctx), key)
	if enc == nil {
		return nil
	}
	switch {
	case h.Kind() == driver.KindPermit && m == driver.ModePermit:
		return nil
	case h.Kind() == driver.KindPermit, m == driver.ModePermit:
		return fmt.Errorf("%w: a %s of %q under a %s of that name", ErrReentry, modeName(m), key, kindName(h.Kind()))
	case h.Kind() == driver.KindRead && m != driver.ModeShared:
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
	if q.mode != driver.ModePermit {
		if l, ok, err := c.reenter(ctx, head, q.name, lc); ok {
			return l, err
		}
	}
	if !c.queues {
		return nil, fmt.Errorf("dlock: %s %q: %w", modeName(q.mode), q.name, ErrUnsupported)
	}
	h, err := c.e.Acquire(ctx, c.queuedRequest(req, q.mode, q.limit, lc, q.wait))
	if err != nil {
		return nil, queueRefusal(modeName(q.mode), q.name, err)
	}
	return c.newLease(h, req.Owner, head, lc), nil
}

// queuedRequest is the engine's request for a queued lease of mode m on
// req's key: limit permits for ModePermit, one attempt or with wait a wait.
func (c *Client) queuedRequest(req driver.AcquireRequest, m driver.Mode, limit int, lc lockConfig, wait bool) engine.Request {
	return engine.Request{Key: req.Key, TTL: req.TTL, Owner: req.Owner, Queued: true, Mode: m, Limit: limit,
		MaxWaiters: c.maxWaiters(lc), Wait: wait, Renew: lc.watchdog}
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

package dlock

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// driverMode is the store's name for m.
func (m mode) driverMode() driver.Mode {
	switch m {
	case modeShared:
		return driver.ModeShared
	case modePermit:
		return driver.ModePermit
	}
	return driver.ModeExclusive
}

// sendQueued makes the acquisition q through the engine's queue, on a
// driver that keeps queued leases (driver.Queuer).
func (c *Client) sendQueued(ctx context.Context, q queued, req driver.AcquireRequest, lc lockConfig, head *mark) (*Lease, error) {
	if !c.queues {
		return nil, fmt.Errorf("dlock: %s %q: %w", q.mode, q.name, ErrUnsupported)
	}
	h, err := c.e.Acquire(ctx, engine.Request{Key: q.name, TTL: req.TTL, Owner: req.Owner, Queued: true,
		Mode: q.mode.driverMode(), Limit: q.limit, MaxWaiters: c.maxWaiters(lc), Wait: q.wait, Renew: lc.watchdog})
	if err != nil {
		return nil, err
	}
	return c.newLease(h, req.Owner, head, lc), nil
}

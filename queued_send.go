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
	if !c.e.SupportsQueue() {
		return nil, fmt.Errorf("dlock: %s %q: %w", q.mode, q.name, ErrUnsupported)
	}
	qr := driver.QueueRequest{Key: q.name, TTL: req.TTL, Owner: req.Owner, Mode: q.mode.driverMode(), Limit: q.limit,
		MaxWaiters: c.maxWaiters(lc)}
	var h *engine.Hold
	var err error
	if q.wait {
		h, err = c.e.AcquireQueued(ctx, qr, lc.watchdog)
	} else {
		h, err = c.e.TryAcquireQueued(ctx, qr, lc.watchdog)
	}
	if err != nil {
		return nil, err
	}
	return c.newLease(h, req.Owner, head, lc), nil
}

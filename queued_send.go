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

// sendQueued makes the acquisition q through the engine, on a driver that
// keeps queued leases (driver.Queuer).
func (c *Client) sendQueued(ctx context.Context, q queued, req driver.AcquireRequest, lc lockConfig) (*Lease, error) {
	qr, ok := c.drv.(driver.Queuer)
	if !ok {
		return nil, fmt.Errorf("dlock: %s %q: %w", q.mode, q.name, ErrUnsupported)
	}
	m := q.mode.driverMode()
	a := engine.Attempt{Kind: m.HolderKind(), Key: q.name, TTL: req.TTL,
		Send: func(ctx context.Context, id string, waiting bool) (driver.AcquireResult, error) {
			res, err := qr.Enqueue(ctx, driver.QueueRequest{Key: q.name, ID: id, TTL: req.TTL,
				Owner: req.Owner, Mode: m, Limit: q.limit})
			return driver.AcquireResult{Acquired: res.Granted, Token: res.Token, RetryAfter: res.RetryAfter}, err
		}}
	var h *engine.Hold
	var err error
	if q.wait {
		h, err = c.e.AcquireWith(ctx, a, lc.watchdog)
	} else {
		h, err = c.e.TryAcquireWith(ctx, a, lc.watchdog)
	}
	if err != nil {
		return nil, err
	}
	return &Lease{h: h, c: c, owner: req.Owner}, nil
}

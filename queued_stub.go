package dlock

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
)

func (c *Client) sendQueued(ctx context.Context, q queued, req driver.AcquireRequest, lc lockConfig) (*Lease, error) {
	return nil, fmt.Errorf("dlock: %s %q: %w", q.mode, q.name, ErrUnsupported)
}

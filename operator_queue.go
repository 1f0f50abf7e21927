package dlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// QueueInfo is what InspectQueue reports about a name: its holders (the
// readers or the writer of a read-write lock, the permits of a semaphore)
// and its waiters in queue order.
type QueueInfo = driver.QueueInfo

// HolderInfo is one holder in a QueueInfo. ID is the holder's Lease.ID,
// which tells permits apart; a permit's Token has no meaning.
type HolderInfo = driver.HolderInfo

// WaiterInfo is one waiter in a QueueInfo.
type WaiterInfo = driver.WaiterInfo

// InspectQueue returns the holders and waiters of the read-write lock or
// semaphore name (an exclusive holder taken with Lock shows as a holder
// too), or ok=false when it has neither. Like the other operator
// functions it needs a driver that implements driver.Inspector; otherwise
// it returns ErrUnsupported.
func (c *Client) InspectQueue(ctx context.Context, name string) (info QueueInfo, ok bool, err error) {
	r, err := operate(c, ctx, "inspect queue", name, true, func(ctx context.Context, insp driver.Inspector) (found[QueueInfo], error) {
		info, ok, err := insp.InspectQueue(ctx, name)
		return found[QueueInfo]{info, ok}, err
	})
	return r.v, r.ok, err
}

// ListQueues returns the read-write locks and semaphores whose names start
// with prefix and that have a reader, a permit or a waiter, each as
// InspectQueue reports it (an exclusive holder included), sorted by name.
// A lock held only exclusively is List's, not this one's. It needs a
// driver that implements driver.QueueLister; otherwise it returns
// ErrUnsupported.
func (c *Client) ListQueues(ctx context.Context, prefix string) ([]QueueInfo, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	ql, ok := c.drv.(driver.QueueLister)
	if !ok {
		return nil, fmt.Errorf("dlock: list queues %q: %w", prefix, ErrUnsupported)
	}
	infos, err := engine.Call(c.e, ctx, func(ctx context.Context) ([]QueueInfo, error) {
		return ql.ListQueues(ctx, prefix)
	})
	if err != nil {
		return nil, c.classify(ctx, "list queues", prefix, err)
	}
	slices.SortFunc(infos, func(a, b QueueInfo) int { return strings.Compare(a.Key, b.Key) })
	return infos, nil
}

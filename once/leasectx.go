package once

import (
	"context"

	"github.com/dlockio/dlock"
)

// claimContext is a claim's context: a cancelCtx under the lease's context,
// whose Err also asks the lease, which compares the clock with its
// validity deadline on every call. A worker that wakes from a pause past
// its lease therefore sees its context ended at its first check, before
// dlock's renewal goroutine has had a chance to close Done.
type claimContext struct {
	context.Context // the cancelCtx: Done, Deadline, Value (context.Cause finds it)
	cancel          context.CancelCauseFunc
	lease           *dlock.Lease
}

func (c claimContext) Err() error {
	if err := c.lease.Err(); err != nil {
		c.cancel(err) // closes Done before Err reports, as contexts promise
	}
	return c.Context.Err()
}

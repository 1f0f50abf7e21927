package election

import (
	"context"
	"time"

	"github.com/dlockio/dlock"
)

// termContext is a term's context: a cancelCtx under the lease's context,
// whose Err also asks the lease, which compares the clock with its
// validity deadline on every call, and steps down itself once only the
// margin is left. A leader that wakes from a pause therefore sees its
// context ended at its first check, before dlock's renewal goroutine or
// the step-down timer have had a chance to close Done.
type termContext struct {
	context.Context // the cancelCtx: Done, Deadline, Value (context.Cause finds it)
	cancel          context.CancelCauseFunc
	lease           *dlock.Lease
	margin          time.Duration
}

func (c termContext) Err() error {
	// Each cancel closes Done before Err reports, as contexts promise, and
	// is a no-op once the context has ended.
	if err := c.lease.Err(); err != nil {
		c.cancel(err)
	} else if time.Until(c.lease.Deadline()) <= c.margin {
		c.cancel(ErrSteppedDown)
	}
	return c.Context.Err()
}

package once

import (
	"context"
	"sync"
	"time"

	"github.com/dlockio/dlock"
)

// Claim is a key claimed by this worker, under a lease of the key's lock.
// End it with Complete, Fail or Release; it is safe for concurrent use.
type Claim struct {
	p      *Processor
	key    string
	lease  *dlock.Lease
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
	once   sync.Once
}

func newClaim(parent context.Context, p *Processor, key string, lease *dlock.Lease) *Claim {
	inner, cancel := context.WithCancelCause(lease.Context())
	ctx := claimContext{Context: inner, cancel: cancel, lease: lease}
	// The work also stops when the caller gives up.
	stop := context.AfterFunc(parent, func() { cancel(context.Cause(parent)) })
	return &Claim{p: p, key: key, lease: lease, ctx: ctx, cancel: cancel, stop: stop}
}

// Key returns the idempotency key.
func (c *Claim) Key() string { return c.key }

// Token returns the claim's fencing token: the lease's. Pass it to every
// guarded write of the work.
func (c *Claim) Token() uint64 { return c.lease.Token() }

// Retention returns how long the record is kept once completed or failed.
func (c *Claim) Retention() time.Duration { return c.p.cfg.retention }

// Context returns a context that ends when the lease ends (its cause is
// the lease's error, such as dlock.ErrLockLost), when the caller's ctx
// given to Begin ends, or when the claim is ended.
func (c *Claim) Context() context.Context { return c.ctx }

// Lease returns the lease the claim lives under.
func (c *Claim) Lease() *dlock.Lease { return c.lease }

// Complete stores result and makes the record Completed, then releases
// the lock. It returns ErrClaimLost, and changes nothing, when a newer
// worker claimed the key after this worker's lease was lost. A store
// error leaves the record in progress; the lock is released either way.
func (c *Claim) Complete(ctx context.Context, result []byte) error {
	err := c.p.store.Complete(ctx, c.key, c.Token(), result, c.p.cfg.retention)
	c.end(ctx)
	return err
}

// Fail makes the record Failed, so that the next delivery runs the work
// again, then releases the lock.
func (c *Claim) Fail(ctx context.Context) error {
	err := c.p.store.Fail(ctx, c.key, c.Token(), c.p.cfg.retention)
	c.end(ctx)
	return err
}

// Release ends the claim without an outcome: the lock is released and
// the record stays in progress under a lease that no longer exists, so
// the next delivery takes it over at once. It is safe to call after
// Complete or Fail (it does nothing then), so it can be deferred.
func (c *Claim) Release(ctx context.Context) { c.end(ctx) }

func (c *Claim) end(ctx context.Context) {
	c.once.Do(func() {
		c.stop()
		c.cancel(context.Canceled)
		// ErrNotHeld only says the lease was lost before; the store's
		// token check already decided the outcome. Bounded, also under a
		// ctx without a deadline, so that a lock store that does not
		// answer holds nobody: past the bound (or an ended ctx) the
		// release goes on in the background (Lease.Unlock).
		uctx, cancel := context.WithTimeout(ctx, completeTimeout)
		defer cancel()
		_ = c.lease.Unlock(uctx)
	})
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
)

// TryAcquire makes one attempt to take req.Key (req.ID is filled in). It
// returns ErrNotAcquired when another owner holds the lock. With renew the
// lease is renewed every TTL/3 until released; without, it ends at its
// validity deadline.
func (e *Engine) TryAcquire(ctx context.Context, req driver.AcquireRequest, renew bool) (*Hold, error) {
	h, _, err := e.attempt(ctx, req, renew)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotAcquired, req.Key)
	}
	return h, nil
}

// Acquire takes req.Key, waiting as long as ctx allows (see wait.go).
func (e *Engine) Acquire(ctx context.Context, req driver.AcquireRequest, renew bool) (*Hold, error) {
	h, _, err := e.patientAttempt(ctx, req, renew)
	if h != nil || err != nil {
		return h, err
	}
	return e.wait(ctx, req, renew)
}

// patientAttempt is attempt for waiting callers: a grant whose reply came
// too late (a cold connection, a hiccup) is retried a few times before the
// backend error is returned; a store always slower than the TTL fails.
func (e *Engine) patientAttempt(ctx context.Context, req driver.AcquireRequest, renew bool) (*Hold, time.Duration, error) {
	for i := 1; ; i++ {
		h, retry, err := e.attempt(ctx, req, renew)
		if i == 3 || !errors.Is(err, errTooSlow) {
			return h, retry, err
		}
	}
}

// attempt makes one acquisition attempt with a fresh owner id. It returns
// the hold when acquired, else how long the holder's lock has left (see
// driver.AcquireResult.RetryAfter).
func (e *Engine) attempt(ctx context.Context, req driver.AcquireRequest, renew bool) (*Hold, time.Duration, error) {
	if !e.beginOp() {
		return nil, 0, ErrClosed
	}
	defer e.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxError("lock", req.Key, err)
	}
	req.ID = newOwnerID()
	// The validity deadline counts from before the request is sent: the
	// store's countdown can only start later.
	sent := e.now()
	res, err := call(e, ctx, func(ctx context.Context) (driver.AcquireResult, error) {
		return e.drv.Acquire(ctx, req)
	}, func(res driver.AcquireResult, err error) {
		// Abandoned, then completed: nobody will use what it took.
		if res.Acquired || err != nil {
			e.releaser.add(req.Key, req.ID)
		}
	})
	if err != nil {
		// The request may have taken the lock with its reply lost: release
		// what we may hold so it does not block others for a whole TTL.
		e.releaser.add(req.Key, req.ID)
		switch {
		case ctx.Err() != nil:
			return nil, 0, ctxError("lock", req.Key, ctx.Err())
		case e.isClosed():
			return nil, 0, ErrClosed
		}
		return nil, 0, WrapBackend("lock", req.Key, err)
	}
	if !res.Acquired {
		return nil, res.RetryAfter, nil
	}
	if took := e.now().Sub(sent); took >= e.validity(req.TTL) {
		// Granted, but the answer took longer than the lease is valid: the
		// lock may already have expired for everyone else. Never hand out a
		// lease that is over before it starts.
		e.releaser.add(req.Key, req.ID)
		return nil, 0, WrapBackend("lock", req.Key, fmt.Errorf("%w: took %v, validity %v",
			errTooSlow, took.Round(time.Millisecond), e.validity(req.TTL)))
	}
	h := &Hold{e: e, key: req.Key, id: req.ID, token: res.Token, ttl: req.TTL}
	h.inner, h.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if !e.renewer.add(h, sent, renew) {
		// Close raced with this acquisition.
		h.end(ErrClosed)
		e.releaser.add(req.Key, req.ID)
		return nil, 0, ErrClosed
	}
	return h, 0, nil
}

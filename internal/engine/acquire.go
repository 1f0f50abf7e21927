package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Attempt describes acquisition attempts of one primitive: what the engine
// needs to send them and to track the lease one may grant. Every primitive
// (the exclusive lock, a reader, a permit, ...) acquires through it, so
// deadlines, lost replies, renewal, release and waiting are written once.
type Attempt struct {
	Kind driver.Kind // the kind of lease a grant is
	Key  string
	TTL  time.Duration // a multiple of the driver's TTLUnit
	// Send makes one attempt in the store under the fresh owner id. waiting
	// says the caller will wait if it fails, so the result's RetryAfter is
	// wanted. An Acquired result is a lease of Kind on Key held by id.
	Send func(ctx context.Context, id string, waiting bool) (driver.AcquireResult, error)
	// Renew renews a granted lease every TTL/3 until it is released;
	// otherwise it ends at its validity deadline.
	Renew bool
}

// lockAttempt is the Attempt of the exclusive lock: Driver.Acquire.
func (e *Engine) lockAttempt(req driver.AcquireRequest, renew bool) Attempt {
	return Attempt{Kind: driver.KindLock, Key: req.Key, TTL: req.TTL, Renew: renew,
		Send: func(ctx context.Context, id string, waiting bool) (driver.AcquireResult, error) {
			r := req
			r.ID, r.Waiting = id, waiting
			return e.drv.Acquire(ctx, r)
		}}
}

// Request is one acquisition, of any primitive by any strategy: the one
// type the engine's Acquire takes.
type Request struct {
	Key   string
	TTL   time.Duration // a multiple of the driver's TTLUnit
	Owner driver.Owner
	// Queued sends the request through the store's queue
	// (driver.Queuer), for a lease of Mode (Limit permits for ModePermit,
	// at most MaxWaiters waiting, 0 for no cap); otherwise it is the plain
	// exclusive lock (Driver.Acquire).
	Queued            bool
	Mode              driver.Mode
	Limit, MaxWaiters int
	// Wait waits as long as ctx allows; otherwise one attempt is made,
	// and a refusal is ErrNotAcquired.
	Wait bool
	// Renew renews the lease every TTL/3 until it is released; otherwise
	// it ends at its validity deadline.
	Renew bool
}

// Acquire makes the acquisition r: the plain lock or a queued lease (see
// queue.go), one attempt or a wait.
func (e *Engine) Acquire(ctx context.Context, r Request) (*Hold, error) {
	if r.Queued {
		if r.Wait {
			return e.acquireQueued(ctx, r)
		}
		return e.tryAcquireQueued(ctx, r)
	}
	a := e.lockAttempt(driver.AcquireRequest{Key: r.Key, TTL: r.TTL, Owner: r.Owner}, r.Renew)
	if r.Wait {
		return e.acquireWith(ctx, a)
	}
	return e.tryAcquireWith(ctx, a)
}

// queueRequest is the store's queue request for r.
func (r Request) queueRequest() driver.QueueRequest {
	return driver.QueueRequest{Key: r.Key, TTL: r.TTL, Owner: r.Owner, Mode: r.Mode, Limit: r.Limit, MaxWaiters: r.MaxWaiters}
}

// tryAcquireWith makes one attempt. It returns ErrNotAcquired when the
// store refused it (another owner holds the lock, no permit is free).
func (e *Engine) tryAcquireWith(ctx context.Context, a Attempt) (*Hold, error) {
	defer e.observing()()
	op := e.startAcquire(&a)
	h, err := e.tryAcquire(ctx, a)
	e.doneAcquire(ctx, op, a, h, err)
	return h, err
}

func (e *Engine) tryAcquire(ctx context.Context, a Attempt) (*Hold, error) {
	h, _, err := e.attempt(ctx, a, false)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotAcquired, a.Key)
	}
	return h, nil
}

// acquireWith makes attempts until one is granted, waiting as long as ctx
// allows (see wait.go).
func (e *Engine) acquireWith(ctx context.Context, a Attempt) (*Hold, error) {
	defer e.observing()()
	op := e.startAcquire(&a)
	h, _, err := e.patientAttempt(ctx, a, false)
	if h == nil && err == nil {
		h, err = e.wait(ctx, a)
	}
	e.doneAcquire(ctx, op, a, h, err)
	return h, err
}

// patientAttempt is attempt for waiting callers: a grant whose reply came
// too late (a cold connection, a hiccup) is retried a few times before the
// backend error is returned; a store always slower than the TTL fails.
func (e *Engine) patientAttempt(ctx context.Context, a Attempt, waiting bool) (*Hold, time.Duration, error) {
	for i := 1; ; i++ {
		h, retry, err := e.attempt(ctx, a, waiting)
		if i == 3 || !errors.Is(err, errTooSlow) {
			return h, retry, err
		}
	}
}

// attempt makes one acquisition attempt with a fresh owner id. It returns
// the hold when acquired, else how long the holder's lock has left (see
// driver.AcquireResult.RetryAfter).
func (e *Engine) attempt(ctx context.Context, a Attempt, waiting bool) (*Hold, time.Duration, error) {
	if !e.beginOp() {
		return nil, 0, ErrClosed
	}
	defer e.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, 0, ctxError("lock", a.Key, err)
	}
	id := newOwnerID()
	release := driver.ReleaseRequest{Kind: a.Kind, Key: a.Key, ID: id}
	// The validity deadline counts from before the request is sent: the
	// store's countdown can only start later.
	sent := e.now()
	res, err := call(e, ctx, func(ctx context.Context) (driver.AcquireResult, error) {
		return a.Send(ctx, id, waiting)
	}, func(res driver.AcquireResult, err error) {
		// Abandoned, then completed: nobody will use what it took.
		if res.Acquired || err != nil {
			e.releaser.add(release)
		}
	})
	if err != nil {
		// The request may have taken the lock with its reply lost: release
		// what we may hold so it does not block others for a whole TTL.
		e.releaser.add(release)
		switch {
		case ctx.Err() != nil:
			return nil, 0, ctxError("lock", a.Key, ctx.Err())
		case e.isClosed():
			return nil, 0, ErrClosed
		}
		return nil, 0, WrapBackend("lock", a.Key, err)
	}
	if !res.Acquired {
		return nil, res.RetryAfter, nil
	}
	took := e.now().Sub(sent)
	if took >= a.TTL/3 {
		var err error
		if sent, err = e.confirm(ctx, a.Key, sent, driver.RenewRequest{Kind: a.Kind, Key: a.Key, ID: id, TTL: a.TTL}); err != nil {
			e.releaser.add(release)
			return nil, 0, err
		}
		took = e.now().Sub(sent)
	}
	if took >= e.validity(a.TTL) {
		// Granted, but the answer took longer than the lease is valid: the
		// lock may already have expired for everyone else. Never hand out a
		// lease that is over before it starts.
		e.releaser.add(release)
		return nil, 0, WrapBackend("lock", a.Key, fmt.Errorf("%w: took %v, validity %v",
			errTooSlow, took.Round(time.Millisecond), e.validity(a.TTL)))
	}
	h := &Hold{e: e, kind: a.Kind, key: a.Key, id: id, token: res.Token, ttl: a.TTL, acquired: sent}
	h.inner, h.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if !e.renewer.add(h, sent, a.Renew) {
		// Close raced with this acquisition.
		h.end(ErrClosed)
		e.releaser.add(release)
		return nil, 0, ErrClosed
	}
	return h, 0, nil
}

// confirm renews a grant whose answer took so long that its first renewal
// is already due (a connection dialled on the way, a stall) and returns
// the send time its leases then count from: the renewal's, if the store
// still held every one of them. Handing the grant out as it was would
// leave its renewal less than a round trip before the deadline, and a
// renewal cut off by its deadline costs go-redis the connection, so the
// next call dials again. The renewal runs on the caller's ctx, not the
// deadline: finding a lease still ours means it was never lost, as an
// expired key cannot be ours again. If the renewal fails, the caller's
// checks decide on sent, as they would have without it. name is for
// errors.
func (e *Engine) confirm(ctx context.Context, name string, sent time.Time, reqs ...driver.RenewRequest) (time.Time, error) {
	again := e.now()
	held, err := call(e, ctx, func(ctx context.Context) ([]bool, error) {
		return e.drv.Renew(ctx, reqs)
	}, nil)
	switch {
	case ctx.Err() != nil:
		return sent, ctxError("lock", name, ctx.Err())
	case e.isClosed():
		return sent, ErrClosed
	case err != nil || len(held) != len(reqs):
		return sent, nil
	}
	for _, ok := range held {
		if !ok {
			return sent, WrapBackend("lock", name, fmt.Errorf("%w: the grant was lost before its slow answer arrived", errTooSlow))
		}
	}
	return again, nil
}

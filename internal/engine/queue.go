package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Queued acquisition: the fair lock, the read-write lock and the semaphore
// (driver.Queuer). A waiter's place in the store's queue is a lease of its
// own, a KindWaiter Hold renewed by the renewer like any other, so a live
// waiter keeps its place however long it waits and a dead one drops out
// within one TTL. The store grants in the same step as a release, and
// announces the grant on this engine's inbox; the waiter then takes the
// lease over, without a round trip if the driver vouches for the
// announcement (driver.Grant's Confirmed), else with one Enqueue, whose
// reply is the grant: on Redis anyone allowed to PUBLISH could have sent
// the announcement, token included. If the announcement is lost, the
// waiter's next renewal answers "not waiting", and one Enqueue with the
// same id picks the grant up: a lost notification costs at most one
// renewal interval.

// errWaitOver ends a waiter's place when it became a lease or its waiter
// gave up; nobody sees it.
var errWaitOver = errors.New("dlock: wait over")

// queuer returns the driver's queue, or an error matching both
// driver.ErrInvalid and errors.ErrUnsupported.
func (e *Engine) queuer() (driver.Queuer, error) {
	q, ok := e.drv.(driver.Queuer)
	if !ok {
		return nil, fmt.Errorf("%w: the driver has no queued leases (fair lock, read-write lock, semaphore): %w",
			driver.ErrInvalid, errors.ErrUnsupported)
	}
	return q, nil
}

// queueAttempt is the Attempt of one queued request that does not wait:
// granted iff nobody waits ahead and it fits the holders.
func (e *Engine) queueAttempt(req driver.QueueRequest) (Attempt, error) {
	q, err := e.queuer()
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{Kind: req.Mode.HolderKind(), Key: req.Key, TTL: req.TTL,
		Send: func(ctx context.Context, id string, _ bool) (driver.AcquireResult, error) {
			r := req
			r.ID, r.Wait, r.Inbox = id, false, ""
			res, err := q.Enqueue(ctx, r)
			return driver.AcquireResult{Acquired: res.Granted, Token: res.Token, RetryAfter: res.RetryAfter}, err
		}}, nil
}

// tryAcquireQueued makes one attempt at a queued lease (see
// tryAcquireWith); it never overtakes a waiter.
func (e *Engine) tryAcquireQueued(ctx context.Context, r Request) (*Hold, error) {
	a, err := e.queueAttempt(r.queueRequest())
	if err != nil {
		return nil, err
	}
	a.Renew = r.Renew
	return e.tryAcquireWith(ctx, a)
}

// acquireQueued takes a queued lease in the store's arrival order, waiting
// as long as ctx allows. When ctx ends the waiter's place is released in
// the background at once; if the store granted it meanwhile, that release
// frees the grant too, for the next waiter.
func (e *Engine) acquireQueued(ctx context.Context, r Request) (*Hold, error) {
	defer e.observing()()
	op := acquireOp{start: e.observeStart()}
	if e.obs != nil {
		op.attempts = new(int) // each Enqueue counts as an attempt
	}
	h, err := e.waitQueued(ctx, r.queueRequest(), r.Renew, op.attempts)
	e.doneAcquire(ctx, op, Attempt{Kind: r.Mode.HolderKind(), Key: r.Key}, h, err)
	return h, err
}

// waitQueued is acquireQueued's loop; renew is the Request's.
func (e *Engine) waitQueued(ctx context.Context, req driver.QueueRequest, renew bool, attempts *int) (*Hold, error) {
	q, err := e.queuer()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError("lock", req.Key, err)
	}
	// The whole wait is one op, so Close waits for it to end: a place or a
	// grant answered to its Enqueue after Close stopped tracking leases is
	// then given to the releaser while it still runs. Between two ops it
	// would be queued after the releaser's last batch and dropped, leaving
	// the name held by nobody for a TTL (Close hands its own held lock to
	// this very waiter).
	if !e.beginOp() {
		return nil, ErrClosed
	}
	defer e.ops.Done()
	// The engine's grant subscription is opened by its first request that
	// has to wait, after that request is queued (then sent again: a grant
	// announced before the subscription was confirmed would be missed),
	// so that an acquisition granted at once never waits for it, nor for
	// a store that does not answer.
	req.ID, req.Wait, req.Inbox = newOwnerID(), true, e.queue.inbox
	qw := &queueWait{e: e, q: q, req: req, renew: renew, kind: req.Mode.HolderKind(),
		place: placeOf(req), grants: e.queue.register(req.ID), subscribed: e.queue.isOpen()}
	defer qw.finish()
	slow := 0
	for {
		if attempts != nil {
			*attempts++
		}
		res, sent, err := e.enqueue(ctx, q, qw.req)
		if err != nil {
			e.releaser.add(qw.place) // enqueue may have queued or granted it, reply lost
			return nil, err
		}
		// A reply so slow that the first renewal of the lease or place it
		// grants is already due (a connection dialled on the way, a stall)
		// would leave that renewal less than a round trip before the
		// deadline, and a renewal cut off by its deadline costs go-redis
		// the connection, so the next one dials too. Ask again instead, up
		// to twice in a row: an Enqueue with the same id extends the grant
		// or place by a full TTL from its own send time.
		if e.now().Sub(sent) >= req.TTL/3 && slow < 2 && (res.Granted || res.Queued) {
			slow++
			continue
		}
		slow = 0
		switch {
		case res.Granted:
			h, err := qw.takeOver(ctx, res.Token, sent)
			if err != nil {
				e.releaser.add(qw.place)
			}
			return h, err
		case !res.Queued:
			e.releaser.add(qw.place)
			return nil, WrapBackend("lock", req.Key, errors.New("driver neither granted nor queued a waiting request"))
		}
		lostPlace, err := qw.queued(ctx, sent)
		if err != nil {
			return nil, err
		}
		if !qw.subscribed {
			if err := qw.subscribe(ctx); err != nil {
				return nil, err
			}
			continue // ask again: granted while subscribing?
		}
		if lostPlace {
			// Queued anew after the old place ended: an announcement still
			// pending is the old place's, whose lease is gone.
			select {
			case <-qw.grants:
			default:
			}
		}
		if h, err := qw.await(ctx, res.RetryAfter); h != nil || err != nil {
			return h, err
		}
	}
}

// enqueue sends one Enqueue and returns its result and send time. A reply
// that comes after the caller gave up releases the place (and a grant).
func (e *Engine) enqueue(ctx context.Context, q driver.Queuer, req driver.QueueRequest) (driver.QueueResult, time.Time, error) {
	if !e.beginOp() {
		return driver.QueueResult{}, time.Time{}, ErrClosed
	}
	defer e.ops.Done()
	if err := ctx.Err(); err != nil {
		return driver.QueueResult{}, time.Time{}, ctxError("lock", req.Key, err)
	}
	sent := e.now()
	var res driver.QueueResult
	var err error
	if e.enqueues.send != nil {
		res, err = e.enqueues.do(ctx, req) // its late releases the place, as below
	} else {
		res, err = call(e, ctx, func(ctx context.Context) (driver.QueueResult, error) {
			return q.Enqueue(ctx, req)
		}, func(driver.QueueResult, error) { e.releaser.add(placeOf(req)) })
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return res, sent, ctxError("lock", req.Key, ctx.Err())
		case e.isClosed():
			return res, sent, ErrClosed
		}
		return res, sent, WrapBackend("lock", req.Key, err)
	}
	return res, sent, nil
}

// placeOf is the release of what an Enqueue of req may have queued or
// granted.
func placeOf(req driver.QueueRequest) driver.ReleaseRequest {
	return driver.ReleaseRequest{Kind: driver.KindWaiter, Key: req.Key, ID: req.ID}
}

// takeOver turns a grant answered to the wait's Enqueue sent at sent into
// a hold.
func (qw *queueWait) takeOver(ctx context.Context, token uint64, sent time.Time) (*Hold, error) {
	e, req := qw.e, qw.req
	if took := e.now().Sub(sent); took >= e.validity(req.TTL) {
		return nil, WrapBackend("lock", req.Key, fmt.Errorf("%w: took %v, validity %v",
			errTooSlow, took.Round(time.Millisecond), e.validity(req.TTL)))
	}
	return e.newHold(ctx, qw.kind, req.Key, req.ID, token, req.TTL, sent, sent, qw.renew)
}

// newHold tracks a lease whose deadline counts from sent and whose hold
// time counts from acquired.
func (e *Engine) newHold(ctx context.Context, kind driver.Kind, key, id string, token uint64, ttl time.Duration, sent, acquired time.Time, renew bool) (*Hold, error) {
	h := &Hold{e: e, kind: kind, key: key, id: id, token: token, ttl: ttl, acquired: acquired}
	h.inner, h.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if !e.renewer.add(h, sent, renew) {
		h.end(ErrClosed)
		return nil, ErrClosed
	}
	return h, nil
}

package engine

import (
	"context"
	"errors"
	"time"

	"github.com/dlockio/dlock/driver"
)

// queueWait is one queued acquisition that waits its turn (waitQueued):
// its request, its place in the store's queue while it has one, and what
// its loop has set up on the way.
type queueWait struct {
	e     *Engine
	q     driver.Queuer
	req   driver.QueueRequest
	renew bool
	kind  driver.Kind           // of the lease a grant is
	place driver.ReleaseRequest // releases the place, and a grant made to it

	grants     chan driver.Grant // this waiter's announcements
	subscribed bool              // the engine's grant subscription is open
	w          *Hold             // the waiter's place while it has one
	poke       *time.Timer       // made on first use: most acquisitions are granted at once
	counted    bool              // in Stats.Waiters, from its first place in the queue
	observed   bool              // its WaitEvent was queued
}

// finish undoes what the wait set up, whatever it ended with.
func (qw *queueWait) finish() {
	e := qw.e
	if qw.counted {
		e.queue.waiting(qw.kind, qw.req.Key, false, qw.observed)
	}
	if qw.w != nil {
		e.renewer.remove(qw.w)
		qw.w.end(errWaitOver)
	}
	if qw.poke != nil {
		qw.poke.Stop()
	}
	e.queue.unregister(qw.req.ID)
}

// dropPlace stops tracking the waiter's place, which became a lease or was
// given up.
func (qw *queueWait) dropPlace() {
	qw.e.renewer.remove(qw.w)
	qw.w.end(errWaitOver)
	qw.w = nil
}

// queued tracks the place an Enqueue sent at sent queued, in place of the
// one before; lostPlace reports that the one before had ended.
func (qw *queueWait) queued(ctx context.Context, sent time.Time) (lostPlace bool, err error) {
	e := qw.e
	lostPlace = qw.w != nil && qw.w.Err() != nil
	if qw.w != nil {
		qw.dropPlace()
	}
	if qw.w, err = e.newHold(ctx, driver.KindWaiter, qw.req.Key, qw.req.ID, 0, qw.req.TTL, sent, sent, true); err != nil {
		qw.w = nil
		e.releaser.add(qw.place)
		return false, err
	}
	if !qw.counted {
		qw.counted = true
		qw.observed = e.queue.waiting(qw.kind, qw.req.Key, true, false)
	}
	return lostPlace, nil
}

// subscribe opens the engine's grant subscription. Only an ending ctx or
// Close fail the wait: without notifications it still works, on renewals.
func (qw *queueWait) subscribe(ctx context.Context) error {
	qw.subscribed = true
	err := qw.e.queue.subscribe(ctx, qw.q, qw.req.Key)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil || errors.Is(err, ErrClosed) {
		qw.e.releaser.add(qw.place)
		return err
	}
	qw.e.log.warn("dlock: grant notifications unavailable; waiting on renewals only", "key", qw.req.Key, "err", err)
	return nil
}

// pokeAfter returns the channel of a timer for a waiter to poke the store
// when the blocking holder expires (retryAfter from the store; negative
// for none), or nil.
func (qw *queueWait) pokeAfter(retryAfter time.Duration) <-chan time.Time {
	// A waiter pokes the store when a blocking holder expires: a store
	// without expiry hooks grants only when a request touches the name.
	if retryAfter < 0 {
		return nil
	}
	d := qw.e.waitFor(retryAfter, qw.req.TTL)
	if qw.poke == nil {
		qw.poke = time.NewTimer(d)
	} else {
		qw.poke.Reset(d)
	}
	return qw.poke.C
}

// await waits for the turn of the waiter's place: it returns the lease
// when an announcement can be taken over as it is, an error when the wait
// is over, and neither when the loop is to ask the store again.
func (qw *queueWait) await(ctx context.Context, retryAfter time.Duration) (*Hold, error) {
	e := qw.e
	select {
	case g := <-qw.grants:
		return qw.takeAnnounced(ctx, g)
	case <-qw.w.Done():
		// The renewal said the place is gone: granted, or dropped.
	case <-qw.pokeAfter(retryAfter):
	case <-e.closed:
		// Close releases the place with every hold it tracks; a place
		// lost at its deadline is no longer tracked (renew.go leaves
		// its release to this loop).
		if qw.w.Err() != nil {
			e.releaser.add(qw.place)
		}
		qw.w = nil
		return nil, ErrClosed
	case <-ctx.Done():
		qw.dropPlace()
		e.releaser.add(qw.place)
		return nil, ctxError("lock", qw.req.Key, ctx.Err())
	}
	return nil, nil
}

// takeAnnounced turns the announcement g into the lease when it can be
// taken over without asking the store; else it returns neither.
func (qw *queueWait) takeAnnounced(ctx context.Context, g driver.Grant) (*Hold, error) {
	e := qw.e
	if !qw.renew || !g.Confirmed {
		// Ask the store once more, which extends the grant by a full
		// TTL and answers it as granted, with its token. An
		// announcement that is not Confirmed may be forged (see
		// driver.Grant): only the store's reply is a grant. A fixed
		// lease is one of TTL from its acquisition, not what the
		// place had left.
		return nil, nil
	}
	// The grant's store TTL is what the waiter place had left, and
	// that place's expiry is no earlier than the validity deadline
	// the renewer computed from the send time of the last enqueue
	// or renewal it saw answered: so the place's deadline is a safe
	// deadline for the lease. A renewal in flight only makes the
	// store's expiry later.
	//
	// The lease keeps the place's renewal schedule, so take it over
	// only while its next renewal is still ahead. Otherwise the
	// place is due (or its renewal is in flight, its answer about
	// to be dropped with the place): the lease would have to be
	// renewed at once, on a deadline that may be too close for a
	// round trip (a grant announced late, replies that lag), and a
	// renewal on a connection go-redis must first dial often is.
	// Asking the store instead extends the grant by a full TTL,
	// counted from that request, for the same one round trip.
	placeSent := qw.w.Deadline().Add(-e.validity(qw.req.TTL))
	if qw.w.Err() != nil || !placeSent.Add(qw.req.TTL/3).After(e.now()) {
		return nil, nil
	}
	qw.dropPlace()
	// Held from now, when this Client learned of the grant: the
	// place's last request, which the deadline counts from, was
	// sent while it still waited.
	h, err := e.newHold(ctx, qw.kind, qw.req.Key, qw.req.ID, g.Token, qw.req.TTL, placeSent, e.now(), qw.renew)
	if err != nil {
		e.releaser.add(qw.place)
	}
	return h, err
}

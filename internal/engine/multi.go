package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Multi-key acquisition: every lock of a request, or none.
//
// When the driver can take the keys in one atomic step
// (driver.MultiAcquirer.Atomic), one call takes them all or changes
// nothing, and a busy attempt waits for a release of any of the keys. A
// waiter then holds nothing, so it cannot be part of a deadlock.
//
// Otherwise the locks are taken one by one, in the order of the request,
// which the caller sorts: every caller waits only for keys greater than
// those it holds, so no two callers can each hold what the other waits
// for, whatever order their users named the keys in. One ctx bounds the
// whole acquisition (a deadline per key would let the total grow with the
// number of keys, and a caller that times out on its last key would
// have kept the first ones for nothing). On any failure the locks taken so
// far are released before the call returns.

// groupLost is the error of a multi-key acquisition one of whose locks,
// taken earlier, was lost before the others were taken: it matches the
// reason (ErrLost, or ErrClosed), not a backend failure.
func groupLost(reqs []driver.AcquireRequest, g *Group) error {
	return fmt.Errorf("dlock: lock %q: a lock taken earlier ended before the others were taken: %w",
		keysName(reqs), g.Err())
}

// AcquireAll takes every lock of reqs, all or none: one attempt, or
// with wait as long as ctx allows. With renew the locks are renewed every
// TTL/3 until released.
func (e *Engine) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest, wait, renew bool) (*Group, error) {
	defer e.observing()()
	start := e.observeStart()
	g, err := e.acquireAll(ctx, reqs, wait, renew)
	e.failedAll(ctx, start, reqs, err)
	return g, err
}

// atomicAll reports whether the driver takes keys in one atomic step.
func (e *Engine) atomicAll(keys []string) bool {
	ma, ok := e.drv.(driver.MultiAcquirer)
	return ok && len(keys) > 1 && ma.Atomic(keys)
}

func (e *Engine) acquireAll(ctx context.Context, reqs []driver.AcquireRequest, wait, renew bool) (*Group, error) {
	g := e.newGroup(ctx, len(reqs), renew)
	var err error
	if e.atomicAll(keysOf(reqs)) {
		err = e.takeStep(ctx, g, reqs, wait)
	} else {
		for i := range reqs {
			if err = e.takeStep(ctx, g, reqs[i:i+1], wait); err != nil {
				break
			}
		}
	}
	if err == nil && g.Err() != nil {
		err = groupLost(reqs, g)
	}
	if err != nil {
		g.abandon(ctx)
		return nil, err
	}
	g.watch()
	return g, nil
}

// takeStep takes reqs (one lock, or all atomically) into g, waiting if
// wait is set.
func (e *Engine) takeStep(ctx context.Context, g *Group, reqs []driver.AcquireRequest, wait bool) error {
	ok, _, busy, err := e.patientGroupAttempt(ctx, g, reqs, false)
	switch {
	case err != nil:
		return err
	case ok:
		return nil
	case !wait:
		return fmt.Errorf("%w: %q", ErrNotAcquired, reqs[busy].Key)
	}
	return e.waitStep(ctx, g, reqs)
}

// patientGroupAttempt is groupAttempt retried, like patientAttempt, when a
// grant's reply came too late.
func (e *Engine) patientGroupAttempt(ctx context.Context, g *Group, reqs []driver.AcquireRequest, waiting bool) (bool, time.Duration, int, error) {
	for i := 1; ; i++ {
		ok, retry, busy, err := e.groupAttempt(ctx, g, reqs, waiting)
		if i == 3 || !errors.Is(err, errTooSlow) {
			return ok, retry, busy, err
		}
	}
}

// groupAttempt makes one attempt at reqs under fresh owner ids; the holds
// it grants join g. It is attempt (acquire.go) for several locks at once:
// the same deadline rule, the same clean-up after lost and late replies.
// When not acquired it returns the index of a busy key and how long its
// holder's lock has left.
func (e *Engine) groupAttempt(ctx context.Context, g *Group, reqs []driver.AcquireRequest, waiting bool) (bool, time.Duration, int, error) {
	if !e.beginOp() {
		return false, 0, 0, ErrClosed
	}
	defer e.ops.Done()
	name := keysName(reqs)
	if err := ctx.Err(); err != nil {
		return false, 0, 0, ctxError("lock", name, err)
	}
	send := make([]driver.AcquireRequest, len(reqs))
	releases := make([]driver.ReleaseRequest, len(reqs))
	ttl := reqs[0].TTL
	for i, r := range reqs {
		r.ID, r.Waiting = newOwnerID(), waiting
		send[i] = r
		releases[i] = driver.ReleaseRequest{Kind: driver.KindLock, Key: r.Key, ID: r.ID}
		ttl = min(ttl, r.TTL)
	}
	releaseAll := func() {
		for _, r := range releases {
			e.releaser.add(r)
		}
	}
	sent := e.now()
	res, err := call(e, ctx, func(ctx context.Context) (driver.AcquireAllResult, error) {
		return e.sendAll(ctx, send)
	}, func(res driver.AcquireAllResult, err error) {
		if res.Acquired || err != nil {
			releaseAll() // abandoned, then completed: nobody will use it
		}
	})
	if err == nil && res.Acquired && len(res.Tokens) != len(send) {
		err = fmt.Errorf("driver answered %d tokens for %d locks", len(res.Tokens), len(send))
	}
	if err == nil && !res.Acquired && (res.Busy < 0 || res.Busy >= len(send)) {
		err = fmt.Errorf("driver answered busy key %d of %d", res.Busy, len(send))
	}
	if err != nil {
		releaseAll() // it may have taken them with its reply lost
		switch {
		case ctx.Err() != nil:
			return false, 0, 0, ctxError("lock", name, ctx.Err())
		case e.isClosed():
			return false, 0, 0, ErrClosed
		}
		return false, 0, 0, WrapBackend("lock", name, err)
	}
	if !res.Acquired {
		return false, res.RetryAfter, res.Busy, nil
	}
	if e.now().Sub(sent) >= ttl/3 {
		renews := make([]driver.RenewRequest, len(send))
		for i, r := range send {
			renews[i] = driver.RenewRequest{Kind: driver.KindLock, Key: r.Key, ID: r.ID, TTL: r.TTL}
		}
		if sent, err = e.confirm(ctx, name, sent, renews...); err != nil {
			releaseAll()
			return false, 0, 0, err
		}
	}
	if took := e.now().Sub(sent); took >= e.validity(ttl) {
		releaseAll()
		return false, 0, 0, WrapBackend("lock", name, fmt.Errorf("%w: took %v, validity %v",
			errTooSlow, took.Round(time.Millisecond), e.validity(ttl)))
	}
	for i, r := range send {
		h := &Hold{e: e, kind: driver.KindLock, key: r.Key, id: r.ID, token: res.Tokens[i], ttl: r.TTL,
			inner: g.inner, cancel: g.cancel, acquired: sent}
		if !e.renewer.add(h, sent, g.renew) {
			// Close raced with this acquisition; it releases what it tracks.
			h.end(ErrClosed)
			releaseAll()
			return false, 0, 0, ErrClosed
		}
		g.holds = append(g.holds, h)
		e.partAcquired(ctx, h, sent)
	}
	return true, 0, 0, nil
}

// sendAll is one store call for reqs: Acquire for one lock, AcquireAll
// for several.
func (e *Engine) sendAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	if len(reqs) == 1 {
		res, err := e.drv.Acquire(ctx, reqs[0])
		if err != nil || !res.Acquired {
			return driver.AcquireAllResult{RetryAfter: res.RetryAfter}, err
		}
		return driver.AcquireAllResult{Acquired: true, Tokens: []uint64{res.Token}}, nil
	}
	ma, ok := e.drv.(driver.MultiAcquirer)
	if !ok {
		return driver.AcquireAllResult{}, fmt.Errorf("%w: driver cannot take several locks at once", driver.ErrInvalid)
	}
	return ma.AcquireAll(ctx, reqs)
}

func keysOf(reqs []driver.AcquireRequest) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	return keys
}

// keysName names the keys of reqs in errors (which quote it).
func keysName(reqs []driver.AcquireRequest) string { return strings.Join(keysOf(reqs), ", ") }

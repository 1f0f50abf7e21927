package memdriver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

var _ driver.Queuer = (*Driver)(nil)

// OpEnqueue, OpWatchGrants and OpInspectQueue name the queue's operations
// for a Fault.
const (
	OpEnqueue      = "enqueue"
	OpWatchGrants  = "watch-grants"
	OpInspectQueue = "inspect-queue"
)

// queueState is the queued side of a name: its shared and permit holders
// and its waiters. The exclusive holder lives in store.locks, like a lock
// taken with Acquire. A queueState exists only while it has someone.
type queueState struct {
	holders map[string]holderState // shared and permit holders by id
	waiters []waiterState          // arrival order: the store's order
}

type holderState struct {
	mode    driver.Mode
	limit   int // of a permit: the name's limit (see permitLimit)
	token   uint64
	owner   driver.Owner
	expires time.Time
}

type waiterState struct {
	id      string
	mode    driver.Mode
	limit   int
	inbox   string
	owner   driver.Owner
	expires time.Time
}

// queueLease names a queued lease: store.qreleased remembers its release
// until the lease would have expired, for a retry, like releasedState.
type queueLease struct{ key, id string }

// Enqueue implements driver.Queuer. Expired holders and waiters of the
// name are dropped, and the heads that then fit are granted, before the
// request is looked at, so the request sees the store as of now.
func (d *Driver) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	if err := d.s.checkLease(req.Key, req.ID, req.TTL); err != nil {
		return driver.QueueResult{}, err
	}
	if err := checkMode(req); err != nil {
		return driver.QueueResult{}, err
	}
	return run(ctx, d, OpEnqueue, func(s *store, now time.Time) (driver.QueueResult, error) {
		s.tick(now)
		q := s.settle(req.Key, now)
		exp := s.expiresAt(now, req.TTL)
		if l, ok := s.live(req.Key, now); ok && l.id == req.ID {
			l.expires = exp
			s.locks[req.Key] = l
			return driver.QueueResult{Granted: true, Token: l.token}, nil
		}
		if q != nil {
			if h, ok := q.holders[req.ID]; ok {
				h.expires = exp
				q.holders[req.ID] = h
				return driver.QueueResult{Granted: true, Token: h.token}, nil
			}
			if i := q.waiterIndex(req.ID); i >= 0 {
				q.waiters[i].expires = exp
				return driver.QueueResult{Queued: true, RetryAfter: s.retryAfter(req.Key, q, now)}, nil
			}
		}
		if req.Mode == driver.ModePermit {
			if lim, ok := q.permitLimit(); ok && lim != req.Limit {
				return driver.QueueResult{}, fmt.Errorf("%w: memdriver: %d permits asked of %q, whose holders and waiters have %d",
					driver.ErrLimitMismatch, req.Limit, req.Key, lim)
			}
		}
		if (q == nil || len(q.waiters) == 0) && s.fits(req.Key, q, req.Mode, req.Limit, now) {
			tok := s.grant(req.Key, req.ID, req.Mode, req.Limit, req.Owner, now, exp)
			return driver.QueueResult{Granted: true, Token: tok}, nil
		}
		if !req.Wait {
			return driver.QueueResult{RetryAfter: s.retryAfter(req.Key, q, now)}, nil
		}
		if q != nil && req.MaxWaiters > 0 && len(q.waiters) >= req.MaxWaiters {
			return driver.QueueResult{}, fmt.Errorf("%w: memdriver: %q has %d waiters", driver.ErrQueueFull, req.Key, len(q.waiters))
		}
		if q == nil {
			q = &queueState{holders: make(map[string]holderState)}
			s.queues[req.Key] = q
		}
		q.waiters = append(q.waiters, waiterState{id: req.ID, mode: req.Mode, limit: req.Limit,
			inbox: req.Inbox, owner: req.Owner, expires: exp})
		return driver.QueueResult{Queued: true, RetryAfter: s.retryAfter(req.Key, q, now)}, nil
	})
}

func checkMode(req driver.QueueRequest) error {
	switch {
	case req.Mode < driver.ModeExclusive || req.Mode > driver.ModePermit:
		return fmt.Errorf("%w: memdriver: unknown mode %v", driver.ErrInvalid, req.Mode)
	case req.Mode == driver.ModePermit && req.Limit < 1:
		return fmt.Errorf("%w: memdriver: permit limit %d of key %q", driver.ErrInvalid, req.Limit, req.Key)
	case req.Wait && req.Inbox == "":
		return fmt.Errorf("%w: memdriver: waiting request without an inbox for key %q", driver.ErrInvalid, req.Key)
	case req.MaxWaiters < 0:
		return fmt.Errorf("%w: memdriver: most waiters %d for key %q", driver.ErrInvalid, req.MaxWaiters, req.Key)
	}
	return nil
}

// permitLimit is the name's permit limit: the Limit its permit holders and
// permit waiters came with (Enqueue lets in no other), if it has any.
func (q *queueState) permitLimit() (int, bool) {
	if q == nil {
		return 0, false
	}
	for _, h := range q.holders {
		if h.mode == driver.ModePermit {
			return h.limit, true
		}
	}
	for _, w := range q.waiters {
		if w.mode == driver.ModePermit {
			return w.limit, true
		}
	}
	return 0, false
}

// settle drops the name's expired holders and waiters, grants to the heads
// of the queue that now fit, in order, and returns what is left (nil when
// nobody). Every operation on a name calls it first, so an expiry grants
// at the next operation that touches the name — as on a store without
// expiry hooks.
func (s *store) settle(key string, now time.Time) *queueState {
	q := s.queues[key]
	if q == nil {
		return nil
	}
	for id, h := range q.holders {
		if !now.Before(h.expires) {
			delete(q.holders, id)
		}
	}
	q.waiters = slices.DeleteFunc(q.waiters, func(w waiterState) bool { return !now.Before(w.expires) })
	for len(q.waiters) > 0 {
		w := q.waiters[0]
		if !s.fits(key, q, w.mode, w.limit, now) {
			break
		}
		q.waiters = q.waiters[1:]
		// The grant keeps the waiter place's expiry: the waiter computed its
		// validity deadline from the send time of the request (enqueue or
		// renewal) that set that expiry, so the lease it now holds cannot
		// expire in the store before the deadline the waiter believes in.
		tok := s.grant(key, w.id, w.mode, w.limit, w.owner, now, w.expires)
		s.announce(w.inbox, driver.Grant{Key: key, ID: w.id, Token: tok})
	}
	if len(q.holders) == 0 && len(q.waiters) == 0 {
		delete(s.queues, key)
		return nil
	}
	return q
}

// fits reports whether a request of mode (and limit) is compatible with
// the name's holders.
func (s *store) fits(key string, q *queueState, mode driver.Mode, limit int, now time.Time) bool {
	if _, ok := s.live(key, now); ok {
		return false
	}
	if q == nil {
		return true
	}
	n := 0
	for _, h := range q.holders {
		if h.mode != mode {
			return false
		}
		n++
	}
	switch mode {
	case driver.ModeExclusive:
		return n == 0
	case driver.ModePermit:
		return n < limit
	}
	return true
}

// grant makes id a holder of mode (limit: a permit's) until expires and
// returns its token.
// Exclusive grants take the next token, as Acquire does; a reader's token
// is the latest token issued (no exclusive token of this name issued
// before it is greater, every one issued after is); a permit takes the
// next token too, only to be unique.
func (s *store) grant(key, id string, mode driver.Mode, limit int, owner driver.Owner, now, expires time.Time) uint64 {
	if mode == driver.ModeExclusive {
		s.last++
		s.locks[key] = lockState{id: id, token: s.last, owner: owner, since: now, expires: expires}
		return s.last
	}
	tok := s.last
	if mode == driver.ModePermit {
		s.last++
		tok = s.last
	}
	q := s.queues[key]
	if q == nil {
		q = &queueState{holders: make(map[string]holderState)}
		s.queues[key] = q
	}
	q.holders[id] = holderState{mode: mode, limit: limit, token: tok, owner: owner, expires: expires}
	return tok
}

// retryAfter is QueueResult.RetryAfter: the time until the first holder
// expires, for every queued or refused request (a waiter behind others may
// become the head by grants it does not hear of).
func (s *store) retryAfter(key string, q *queueState, now time.Time) time.Duration {
	var first time.Time
	if l, ok := s.live(key, now); ok {
		first = l.expires
	}
	if q != nil {
		for _, h := range q.holders {
			if first.IsZero() || h.expires.Before(first) {
				first = h.expires
			}
		}
	}
	if first.IsZero() {
		return -1 // only waiters ahead: their grants are announced
	}
	return max(first.Sub(now), 0)
}

func (q *queueState) waiterIndex(id string) int {
	return slices.IndexFunc(q.waiters, func(w waiterState) bool { return w.id == id })
}

// busy reports whether Acquire must refuse key for the queue's sake: it
// has waiters (Acquire would jump them) or shared or permit holders.
func (s *store) busy(key string, now time.Time) (time.Duration, bool) {
	q := s.settle(key, now)
	if q == nil {
		return 0, false
	}
	return s.retryAfter(key, q, now), true
}

// releaseQueued releases a lease of a queued kind.
func (s *store) releaseQueued(r driver.ReleaseRequest, now time.Time) driver.ReleaseResult {
	q := s.settle(r.Key, now)
	lease := queueLease{r.Key, r.ID}
	done := false
	var expires time.Time
	if q != nil {
		if h, ok := q.holders[r.ID]; ok && (r.Kind == driver.KindWaiter || h.mode.HolderKind() == r.Kind) {
			delete(q.holders, r.ID)
			done, expires = true, h.expires
		} else if i := q.waiterIndex(r.ID); i >= 0 && r.Kind == driver.KindWaiter {
			expires = q.waiters[i].expires
			q.waiters = slices.Delete(q.waiters, i, i+1)
			done = true
		}
	}
	if !done && r.Kind == driver.KindWaiter {
		// Granted the exclusive lease while the waiter was cancelling.
		if res := s.release(driver.ReleaseRequest{Kind: driver.KindLock, Key: r.Key, ID: r.ID}, now); res != driver.NotHeld {
			return res
		}
	}
	if !done {
		if exp, ok := s.qreleased[lease]; ok && now.Before(exp) {
			return driver.AlreadyReleased
		}
		return driver.NotHeld
	}
	s.qreleased[lease] = expires
	if s.settle(r.Key, now) == nil {
		if _, ok := s.live(r.Key, now); !ok {
			s.notify(r.Key) // free: wake Acquire's waiters
		}
	}
	return driver.Released
}

// renewQueued renews a lease of a queued kind; see driver.Queuer.
func (s *store) renewQueued(r driver.RenewRequest, now time.Time) bool {
	q := s.settle(r.Key, now)
	if q == nil {
		return false
	}
	exp := s.expiresAt(now, r.TTL)
	if r.Kind == driver.KindWaiter {
		i := q.waiterIndex(r.ID)
		if i < 0 {
			return false
		}
		q.waiters[i].expires = exp
		return true
	}
	h, ok := q.holders[r.ID]
	if !ok || h.mode.HolderKind() != r.Kind {
		return false
	}
	h.expires = exp
	q.holders[r.ID] = h
	return true
}

// InspectQueue implements driver.Inspector.
func (d *Driver) InspectQueue(ctx context.Context, key string) (driver.QueueInfo, bool, error) {
	if err := checkKey(key); err != nil {
		return driver.QueueInfo{}, false, err
	}
	type result struct {
		info driver.QueueInfo
		ok   bool
	}
	r, err := run(ctx, d, OpInspectQueue, func(s *store, now time.Time) (result, error) {
		q := s.settle(key, now)
		info := driver.QueueInfo{Key: key, Holders: []driver.HolderInfo{}, Waiters: []driver.WaiterInfo{}}
		if l, ok := s.live(key, now); ok {
			info.Holders = append(info.Holders, driver.HolderInfo{ID: l.id, Mode: driver.ModeExclusive,
				Token: l.token, Owner: l.owner, TTL: l.expires.Sub(now)})
		}
		if q != nil {
			for id, h := range q.holders {
				info.Holders = append(info.Holders, driver.HolderInfo{ID: id, Mode: h.mode,
					Token: h.token, Owner: h.owner, TTL: h.expires.Sub(now)})
			}
			for _, w := range q.waiters {
				info.Waiters = append(info.Waiters, driver.WaiterInfo{ID: w.id, Mode: w.mode,
					Limit: w.limit, Owner: w.owner, TTL: w.expires.Sub(now)})
			}
		}
		slices.SortFunc(info.Holders, func(a, b driver.HolderInfo) int {
			return cmp.Or(cmp.Compare(a.Token, b.Token), strings.Compare(a.ID, b.ID))
		})
		return result{info, len(info.Holders)+len(info.Waiters) > 0}, nil
	})
	return r.info, r.ok, err
}

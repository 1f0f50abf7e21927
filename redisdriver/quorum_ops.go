package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Renew implements driver.Driver: every master renews the leases it still
// holds, and a lease is held while a majority confirms. A lease that fewer
// than a majority confirmed, but that the masters which did not answer
// could still make up, is undecided: the call then fails with ErrNoQuorum
// and the engine tries again until the lease's validity deadline, which
// passes before any of its majority's keys can expire.
func (q *Quorum) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	// A grant of a lease's acquisition that is being released in the
	// background (a late one, or a restarted master's) must not confirm a
	// renewal: it is gone a moment later. Free when nothing is under way.
	for _, r := range reqs {
		if _, err := q.settling(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	answers := fanOut(ctx, q, q.all(), q.callTimeout(ctx), func(ctx context.Context, m *member) ([]bool, error) {
		return m.d.Renew(ctx, reqs)
	}, q.renewDecided(len(reqs)), nil)
	if err := invalid(answers); err != nil {
		return nil, err
	}
	confirmed := make([]int, len(reqs))
	answered, errs := 0, []error(nil)
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("master %d: %w", a.i, a.err))
			continue
		}
		answered++
		for k, ok := range a.v {
			if ok {
				confirmed[k]++
			}
		}
	}
	silent := len(q.members) - answered
	held := make([]bool, len(reqs))
	for k, n := range confirmed {
		held[k] = n >= q.majority
		if !held[k] && n+silent >= q.majority {
			return nil, q.noQuorum("renew", answered, errs)
		}
	}
	return held, nil
}

// callTimeout bounds the wait for the masters' answers to a renewal or a
// release: ctx's deadline when it has one (the engine's, which knows how
// long the lease has), else the vote timeout. A batch of a thousand leases
// on a loaded server may take longer than a vote should.
func (q *Quorum) callTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return q.cfg.voteTimeout
}

// decidedEach returns, for fanOut, whether each of n requests is decided:
// a majority of the answers said yes to it (is), or a majority said no.
// The other masters' answers cannot change it then.
func decidedEach[T any](q *Quorum, n int, is func(T) bool) func([]answer[[]T]) bool {
	return func(got []answer[[]T]) bool {
		for k := range n {
			yes, no := 0, 0
			for _, a := range got {
				switch {
				case a.err != nil:
				case is(a.v[k]):
					yes++
				default:
					no++
				}
			}
			if yes < q.majority && no < q.majority {
				return false
			}
		}
		return true
	}
}

// renewDecided: a majority confirmed or refused each of n renewals.
func (q *Quorum) renewDecided(n int) func([]answer[[]bool]) bool {
	return decidedEach(q, n, func(held bool) bool { return held })
}

// releaseDecided: a majority released or did not hold each of n leases.
// The masters that answer later release theirs all the same.
func (q *Quorum) releaseDecided(n int) func([]answer[[]driver.ReleaseResult]) bool {
	return decidedEach(q, n, func(r driver.ReleaseResult) bool { return r != driver.NotHeld })
}

// Release implements driver.Driver: every master releases the leases it
// still holds, and publishes the names it leaves free. A lease counts as
// Released when a majority released it now or before and one released it
// now (a master that had not heard of the first try of a retried release
// says Released: a majority's AlreadyReleased wins); AlreadyReleased when
// a majority had released it before; NotHeld
// when a majority answered that it was not held. Anything the masters that
// did not answer could still change fails with ErrNoQuorum: the engine
// tries again, and the keys expire by themselves meanwhile.
func (q *Quorum) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	q.releasing(reqs)
	answers := fanOut(ctx, q, q.all(), q.callTimeout(ctx), func(ctx context.Context, m *member) ([]driver.ReleaseResult, error) {
		return m.d.Release(ctx, reqs)
	}, q.releaseDecided(len(reqs)), nil)
	if err := invalid(answers); err != nil {
		return nil, err
	}
	released, already, notHeld := make([]int, len(reqs)), make([]int, len(reqs)), make([]int, len(reqs))
	answered, errs := 0, []error(nil)
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, fmt.Errorf("master %d: %w", a.i, a.err))
			continue
		}
		answered++
		for k, r := range a.v {
			switch r {
			case driver.Released:
				released[k]++
			case driver.AlreadyReleased:
				already[k]++
			default:
				notHeld[k]++
			}
		}
	}
	results := make([]driver.ReleaseResult, len(reqs))
	for k := range reqs {
		switch {
		case already[k] >= q.majority:
			results[k] = driver.AlreadyReleased
		case released[k]+already[k] >= q.majority:
			results[k] = driver.Released
		case notHeld[k] >= q.majority:
			results[k] = driver.NotHeld
		case answered == len(q.members):
			// Every master answered and none of the above holds: the lease
			// was held by a minority only (lost), and is free now.
			results[k] = driver.NotHeld
		default:
			return nil, q.noQuorum("release", answered, errs)
		}
	}
	return results, nil
}

// Watch implements driver.Driver with a watcher on every master. A
// release publishes on every master that releases it, a majority of them,
// and an Add is confirmed by a majority, so at least one master that
// published the release is followed. onRelease is called once per
// release, one call at a time: see quorumWatcher.notify.
func (q *Quorum) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	w := &quorumWatcher{q: q, onRelease: onRelease, recent: map[string]*heard{}}
	for i, m := range q.members {
		mw, err := m.d.Watch(func(key string) { w.notify(i, key) })
		if err != nil {
			_ = w.Close()
			return nil, err
		}
		w.ws = append(w.ws, mw)
	}
	return w, nil
}

// quorumWatcher is the union of the masters' watchers.
type quorumWatcher struct {
	q         *Quorum
	onRelease func(key string)
	mu        sync.Mutex // serialises notify
	ws        []driver.Watcher
	recent    map[string]*heard
}

// heard is a followed key: how many Adds not yet removed, which masters
// published its release since it was last passed on, and when it was.
type heard struct {
	refs    int
	at      time.Time
	masters uint64 // bit i: master i
}

// notify passes master i's release of key on, unless it is the same
// release another master published a moment ago: within the vote timeout
// of the last one passed on, from a master that has not published since.
// A later release publishes on a majority, which shares a master with the
// earlier one's, so it is passed on at the latest when that master's
// publication comes; a waiter that missed it still tries again after its
// RetryAfter.
func (w *quorumWatcher) notify(i int, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	bit := uint64(1) << i
	now := time.Now()
	h := w.recent[key]
	if h == nil || h.refs <= 0 {
		return // a late publication of a key no longer followed
	}
	if h.masters&bit == 0 && now.Sub(h.at) < w.q.cfg.voteTimeout {
		h.masters |= bit
		return
	}
	h.at, h.masters = now, bit
	w.onRelease(key)
}

// Add implements driver.Watcher: it returns once a majority of the masters
// confirmed the subscription. Every Add is made on every master (and is
// undone by one Remove), whether it was confirmed there or not.
func (w *quorumWatcher) Add(ctx context.Context, key string) error {
	w.mu.Lock()
	h := w.recent[key]
	if h == nil {
		h = &heard{}
		w.recent[key] = h
	}
	h.refs++
	w.mu.Unlock()
	return w.each(ctx, "watch", func(ctx context.Context, mw driver.Watcher) error { return mw.Add(ctx, key) })
}

// Remove implements driver.Watcher.
func (w *quorumWatcher) Remove(ctx context.Context, key string) error {
	w.mu.Lock()
	if h := w.recent[key]; h != nil {
		if h.refs--; h.refs <= 0 {
			delete(w.recent, key)
		}
	}
	w.mu.Unlock()
	return w.each(ctx, "unwatch", func(ctx context.Context, mw driver.Watcher) error { return mw.Remove(ctx, key) })
}

// each runs op on every master's watcher at once, and returns once a
// majority succeeded, or enough failed that none can: a silent master does
// not hold up a waiter's watch (its op goes on, bounded by ctx, and Close
// of the Quorum waits for it).
func (w *quorumWatcher) each(ctx context.Context, what string, op func(context.Context, driver.Watcher) error) error {
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(w.ws))
	for i, mw := range w.ws {
		w.q.calls.Add(1)
		go func() {
			defer w.q.calls.Done()
			results <- result{i, op(ctx, mw)}
		}()
	}
	ok := 0
	var failed []error
	for range w.ws {
		r := <-results
		if r.err == nil {
			ok++
		} else {
			failed = append(failed, fmt.Errorf("master %d: %w", r.i, r.err))
		}
		if ok >= w.q.majority || len(failed) > len(w.ws)-w.q.majority {
			break
		}
	}
	if ok >= w.q.majority {
		return nil
	}
	if err := errors.Join(failed...); errors.Is(err, driver.ErrInvalid) || ctx.Err() != nil {
		return err
	}
	return w.q.noQuorum(what, ok, failed)
}

// Close implements driver.Watcher.
func (w *quorumWatcher) Close() error {
	var errs []error
	for _, mw := range w.ws {
		errs = append(errs, mw.Close())
	}
	return errors.Join(errs...)
}

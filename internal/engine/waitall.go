package engine

import (
	"context"
	"time"

	"github.com/dlockio/dlock/driver"
)

// waitStep is takeStep's slow path (multi.go): the first attempt at reqs
// found a lock busy. One waiter joins the queue of every key of reqs, so a
// release of any of them wakes it; the fallback sleep is the busy
// holder's remaining TTL, as for a single lock. For several keys taken
// atomically the waiter holds nothing of reqs while it waits.
func (e *Engine) waitStep(ctx context.Context, g *Group, reqs []driver.AcquireRequest) error {
	w := &waiter{wake: make(chan struct{}, 1)}
	keys := keysOf(reqs)
	joined := 0
	defer func() { e.waits.leaveAll(keys[:joined], w) }()
	for _, k := range keys {
		if err := e.waits.joinWith(ctx, k, w); err != nil {
			return err
		}
		joined++
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	woken := false
	for {
		// Attempt after joining, as wait does: a release between the first
		// attempt and the subscriptions is not missed.
		ok, retry, _, err := e.patientGroupAttempt(ctx, g, reqs, true)
		if ok {
			return nil
		}
		if err != nil {
			if woken {
				w.signal() // leaveAll passes the unused turn on
			}
			return err
		}
		if woken {
			// The release that woke this waiter may have freed a key that
			// the next waiter of that key can use although this one could
			// not use them all: pass the turn on.
			e.waits.passOn(keys, w)
		}
		woken = false
		timer.Reset(e.waitFor(retry, reqs[0].TTL))
		select {
		case <-w.wake:
			woken = true
		case <-timer.C:
		case <-e.closed:
			return ErrClosed
		case <-ctx.Done():
			return ctxError("lock", keysName(reqs), ctx.Err())
		case <-g.inner.Done():
			return groupLost(reqs, g)
		}
	}
}

// leaveAll removes w, which waited for keys, from their queues. A wake-up
// w did not use goes to the next waiter of every queue w was first in.
func (r *waitRegistry) leaveAll(keys []string, w *waiter) {
	pending := false
	select {
	case <-w.wake:
		pending = true
	default:
	}
	for _, k := range keys {
		if pending {
			w.signal() // leave consumes it if w was first and hands it on
		}
		r.leave(k, w)
	}
}

// passOn wakes the waiter after w in every queue of keys that w is first
// in.
func (r *waitRegistry) passOn(keys []string, w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if q := r.queues[k]; q != nil && len(q.waiters) > 1 && q.waiters[0] == w {
			q.waiters[1].signal()
		}
	}
}

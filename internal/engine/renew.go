package engine

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

var errShortRenew = errors.New("driver answered a renewal with the wrong number of results")

// renewer is the one renewal loop of an engine. It keeps every live hold
// in a heap ordered by its next event — the next renewal, or, while a
// renewal is in flight or for fixed leases, the validity deadline — and
// wakes once for the earliest. Due renewals are batched into few driver
// calls that run off the loop. Nothing on the loop can block: renewals run
// on their own goroutines, logging goes through a queue, releases are
// queued. Ending a hold at its deadline does not even depend on the loop:
// Hold.Err checks the deadline itself; the loop only closes Done.
type renewer struct {
	e *Engine

	mu      sync.Mutex
	h       holdHeap
	stopped bool
	wakeAt  time.Time // when the loop will wake next; add kicks only if earlier

	kick    chan struct{} // a hold was added: recompute the next wake-up
	wakeups atomic.Int64  // loop iterations, for tests of how often add kicks
	results chan renewal
	stopCh  chan struct{}
	loopWG  sync.WaitGroup
	callWG  sync.WaitGroup // renew calls in flight
}

// watchState is a hold's bookkeeping, guarded by renewer.mu.
type watchState struct {
	index    int       // position in the heap; -1 when not tracked
	deadline time.Time // lost at this instant unless a renewal moves it
	next     time.Time // next renewal; zero for fixed leases
	inflight bool
}

func (s *watchState) wake() time.Time {
	if s.inflight || s.next.IsZero() {
		return s.deadline
	}
	return s.next
}

type renewal struct {
	holds []*Hold
	sent  time.Time
	held  []bool
	err   error
}

func newRenewer(e *Engine) *renewer {
	r := &renewer{
		e:       e,
		kick:    make(chan struct{}, 1),
		results: make(chan renewal),
		stopCh:  make(chan struct{}),
	}
	r.loopWG.Add(1)
	go r.loop()
	return r
}

// setDeadline moves h's validity deadline; called with r.mu held.
func (r *renewer) setDeadline(h *Hold, d time.Time) {
	h.watch.deadline = d
	h.deadline.Store(int64(d.Sub(r.e.epoch)))
}

// add starts tracking h, whose acquire request was sent at sent. It
// reports false if the renewer has stopped.
func (r *renewer) add(h *Hold, sent time.Time, renew bool) bool {
	st := &h.watch
	st.index = -1
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return false
	}
	r.setDeadline(h, sent.Add(r.e.validity(h.ttl)))
	if renew {
		st.next = sent.Add(h.ttl / 3)
	}
	heap.Push(&r.h, heapEntry{wake: st.wake(), h: h})
	// Most holds are due after the one the loop already sleeps for; only
	// wake the loop (a goroutine switch on the acquire path) if not. The
	// loop keeps this wake time even if the hold is gone by the time it
	// runs (a short critical section), so the next add does not kick again.
	early := st.wake().Before(r.wakeAt)
	if early {
		r.wakeAt = st.wake()
	}
	r.mu.Unlock()
	if early {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// remove stops tracking h (released). A renewal in flight for it is ignored.
func (r *renewer) remove(h *Hold) {
	r.mu.Lock()
	if h.watch.index >= 0 {
		heap.Remove(&r.h, h.watch.index)
	}
	r.mu.Unlock()
}

// stop ends the loop and returns the holds that were still tracked. It
// does not wait for renew calls in flight (see wait): the caller ends the
// holds first.
func (r *renewer) stop() []*Hold {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	close(r.stopCh)
	r.loopWG.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	left := make([]*Hold, len(r.h))
	for i, e := range r.h {
		e.h.watch.index = -1
		left[i] = e.h
	}
	r.h = nil
	return left
}

// wait waits for renew calls in flight; their results are dropped.
func (r *renewer) wait() { r.callWG.Wait() }

func (r *renewer) loop() {
	defer r.loopWG.Done()
	ctx, cancel := context.WithCancel(r.e.ctx)
	defer cancel() // aborts renew calls in flight when the loop stops
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.wakeups.Add(1)
		wait := r.tick(ctx)
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-r.kick:
		case res := <-r.results:
			r.apply(res)
		case <-r.stopCh:
			return
		}
	}
}

// tick ends holds past their deadline, starts due renewals, and returns
// how long to sleep until the next event.
func (r *renewer) tick(ctx context.Context) time.Duration {
	now := r.e.now()
	var lost, due []*Hold
	r.mu.Lock()
	for len(r.h) > 0 {
		h := r.h[0].h
		st := &h.watch
		// A hold that Err ended at its deadline may still be here if a
		// renewal answered in between moved the deadline (see apply).
		if !now.Before(st.deadline) || h.ended.Load() {
			heap.Pop(&r.h)
			lost = append(lost, h)
			continue
		}
		if st.inflight || st.next.IsZero() {
			break
		}
		// A batch starts only when a renewal is actually due, and then takes
		// along every hold due within 1/8 of its interval: holds taken over
		// time are renewed in few large calls, not a stream of small ones.
		if len(due) == 0 && st.next.After(now) || st.next.Sub(now) > h.ttl/24 {
			break
		}
		st.inflight = true
		r.h.update(0)
		due = append(due, h)
	}
	// With no holds, sleep until the wake time promised by the last kick
	// if it is still ahead (see add), else for an hour.
	wait := time.Hour
	switch {
	case len(r.h) > 0:
		wait = max(r.h[0].wake.Sub(now), 0)
	case r.wakeAt.After(now):
		wait = r.wakeAt.Sub(now)
	}
	r.wakeAt = now.Add(wait)
	r.mu.Unlock()

	for _, h := range lost {
		// A waiter's place that ends is no lock lost: its waiter asks the
		// store what became of it (queue.go).
		if h.lose(LostDeadline) && h.kind != driver.KindWaiter {
			r.e.log.warn("dlock: lock lost: validity deadline passed without a successful renewal",
				"key", h.key, "token", h.token)
		}
		// The store may still hold the key for us (a renewal that landed
		// but whose reply did not): free it for the others. Not a waiter's
		// place: its waiter asks the store again with the same id, which
		// may be granted, and a release sent now (still in flight through
		// an outage) could land after that grant and free the lease the
		// waiter then holds. Every way out of the wait releases the place
		// itself (queue.go).
		if h.kind != driver.KindWaiter {
			r.e.releaser.add(h.releaseRequest())
		}
	}
	for len(due) > 0 {
		n := min(len(due), r.e.caps.MaxBatch)
		r.startRenew(ctx, due[:n:n], now)
		due = due[n:]
	}
	return wait
}

func (r *renewer) startRenew(ctx context.Context, holds []*Hold, sent time.Time) {
	reqs := make([]driver.RenewRequest, len(holds))
	earliest := holds[0].watch.deadline
	for i, h := range holds {
		reqs[i] = driver.RenewRequest{Kind: h.kind, Key: h.key, ID: h.id, TTL: h.ttl}
		earliest = minTime(earliest, h.watch.deadline)
	}
	r.callWG.Add(1)
	go func() {
		defer r.callWG.Done()
		// An answer after the earliest deadline is of no use to that hold,
		// and the others will be retried.
		callCtx, cancel := context.WithDeadline(ctx, earliest)
		defer cancel()
		r.e.stats.renewing.Add(1)
		held, err := r.e.drv.Renew(callCtx, reqs)
		r.e.stats.renewing.Add(-1)
		if err == nil && len(held) != len(reqs) {
			err = errShortRenew
		}
		select {
		case r.results <- renewal{holds: holds, sent: sent, held: held, err: err}:
		case <-ctx.Done():
		}
	}()
}

// apply records a renewal's answers. A renewal answered after a hold's
// deadline does not revive it: Err may already have reported it lost.
func (r *renewer) apply(res renewal) {
	now := r.e.now()
	r.e.renewed(res, now)
	var lost, notOurs []*Hold
	r.mu.Lock()
	for i, h := range res.holds {
		st := &h.watch
		if st.index < 0 {
			continue // released or already lost meanwhile
		}
		st.inflight = false
		switch {
		case !now.Before(st.deadline) || h.ended.Load():
			// Ended by Err, which read a later clock than now: never
			// extend a hold that has reported itself lost.
			heap.Remove(&r.h, st.index)
			lost = append(lost, h)
			continue
		case res.err != nil:
			// Short TTLs need their retries inside the validity window.
			st.next = minTime(now.Add(min(r.e.retryDelay, h.ttl/6)), st.deadline)
		case res.held[i]:
			r.setDeadline(h, res.sent.Add(r.e.validity(h.ttl)))
			st.next = res.sent.Add(h.ttl / 3)
		default:
			heap.Remove(&r.h, st.index)
			notOurs = append(notOurs, h)
			continue
		}
		r.h.update(st.index)
	}
	r.mu.Unlock()
	if res.err != nil {
		r.e.log.warn("dlock: renewal failed; will retry until the validity deadline",
			"leases", len(res.holds), "err", res.err)
	}
	for _, h := range lost {
		if h.lose(LostDeadline) && h.kind != driver.KindWaiter {
			r.e.log.warn("dlock: lock lost: validity deadline passed without a successful renewal",
				"key", h.key, "token", h.token)
		}
	}
	for _, h := range notOurs {
		if h.lose(LostNotHeld) && h.kind != driver.KindWaiter {
			r.e.log.warn("dlock: lock lost: no longer held in the store", "key", h.key, "token", h.token)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// holdHeap orders holds by their next renewer event. Each entry keeps its
// wake time inline, so comparisons during sifting read the slice, not every
// hold (100k holds renewed every second sift a lot).
type holdHeap []heapEntry

type heapEntry struct {
	wake time.Time
	h    *Hold
}

// update re-reads the wake time of the hold at i after its watch state
// changed, and restores the heap order.
func (h *holdHeap) update(i int) {
	(*h)[i].wake = (*h)[i].h.watch.wake()
	heap.Fix(h, i)
}

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h holdHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].h.watch.index = i
	h[j].h.watch.index = j
}
func (h *holdHeap) Push(x any) {
	e := x.(heapEntry)
	e.h.watch.index = len(*h)
	*h = append(*h, e)
}
func (h *holdHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = heapEntry{}
	e.h.watch.index = -1
	*h = old[:len(old)-1]
	return e
}

package dlock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

var errShortRenew = errors.New("dlock: driver answered a renewal with the wrong number of results")

// maxRenewBatch caps how many leases one Renew call carries, so a client
// with 100k leases sends several pipelined calls instead of one huge one.
const maxRenewBatch = 1000

// watchdog is the one renewal loop of a Client. It keeps every live lease
// in a heap ordered by its next event — the next renewal, or, while a
// renewal is in flight or for fixed leases, the validity deadline — and
// wakes once for the earliest. Due renewals are batched into few driver
// calls that run off the loop, so a slow store never delays declaring a
// lease lost at its deadline.
type watchdog struct {
	c *Client

	mu      sync.Mutex
	h       leaseHeap
	stopped bool
	wakeAt  time.Time // when the loop will wake next; add kicks only if earlier

	kick    chan struct{} // a lease was added: recompute the next wake-up
	wakeups atomic.Int64  // loop iterations, for tests of how often add kicks
	results chan renewal
	stopCh  chan struct{}
	loopWG  sync.WaitGroup
	callWG  sync.WaitGroup // in-flight renew calls
}

// watchState is a lease's bookkeeping, guarded by watchdog.mu.
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
	leases []*Lease
	sent   time.Time
	held   []bool
	err    error
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{
		c:       c,
		kick:    make(chan struct{}, 1),
		results: make(chan renewal),
		stopCh:  make(chan struct{}),
	}
	w.loopWG.Add(1)
	go w.loop()
	return w
}

// add starts tracking l, whose acquire request was sent at sent. It
// reports false if the watchdog has stopped.
func (w *watchdog) add(l *Lease, sent time.Time, renew bool) bool {
	st := &l.watch
	st.deadline = sent.Add(validity(l.ttl))
	if renew {
		st.next = sent.Add(l.ttl / 3)
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	heap.Push(&w.h, heapEntry{wake: st.wake(), l: l})
	// Most leases are due after the one the loop already sleeps for; only
	// wake the loop (a goroutine switch on the acquire path) if not. The
	// loop keeps this wake time even if the lease is gone by the time it
	// runs (a short critical section), so the next add does not kick again.
	early := st.wake().Before(w.wakeAt)
	if early {
		w.wakeAt = st.wake()
	}
	w.mu.Unlock()
	if early {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// remove stops tracking l (Unlock). A renewal in flight for it is ignored.
func (w *watchdog) remove(l *Lease) {
	w.mu.Lock()
	if l.watch.index >= 0 {
		heap.Remove(&w.h, l.watch.index)
	}
	w.mu.Unlock()
}

// stop ends the loop, waits for renew calls, and returns the leases that
// were still tracked.
func (w *watchdog) stop() []*Lease {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	close(w.stopCh)
	w.loopWG.Wait()
	w.callWG.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	left := make([]*Lease, len(w.h))
	for i, e := range w.h {
		e.l.watch.index = -1
		left[i] = e.l
	}
	w.h = nil
	return left
}

func (w *watchdog) loop() {
	defer w.loopWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // aborts renew calls in flight when the loop stops
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.wakeups.Add(1)
		wait := w.tick(ctx)
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-w.kick:
		case r := <-w.results:
			w.apply(r)
		case <-w.stopCh:
			return // the deferred cancel makes renew goroutines give up
		}
	}
}

// tick ends leases past their deadline, starts due renewals, and returns
// how long to sleep until the next event.
func (w *watchdog) tick(ctx context.Context) time.Duration {
	now := w.c.cfg.now()
	var lost, due []*Lease
	w.mu.Lock()
	for len(w.h) > 0 {
		l := w.h[0].l
		st := &l.watch
		if !now.Before(st.deadline) {
			heap.Pop(&w.h)
			lost = append(lost, l)
			continue
		}
		if st.inflight || st.next.IsZero() {
			break
		}
		// A batch starts only when a renewal is actually due, and then takes
		// along every lease due within 1/8 of its interval: leases taken
		// over time are renewed in few large calls, not a stream of small
		// ones.
		if len(due) == 0 && st.next.After(now) || st.next.Sub(now) > l.ttl/24 {
			break
		}
		st.inflight = true
		w.h.update(0)
		due = append(due, l)
	}
	// With no leases, sleep until the wake time promised by the last kick
	// if it is still ahead (see add), else for an hour.
	wait := time.Hour
	switch {
	case len(w.h) > 0:
		wait = max(w.h[0].wake.Sub(now), 0)
	case w.wakeAt.After(now):
		wait = w.wakeAt.Sub(now)
	}
	w.wakeAt = now.Add(wait)
	w.mu.Unlock()

	for _, l := range lost {
		if l.end(ErrLockLost) {
			w.c.cfg.logger.Warn("dlock: lock lost: validity deadline passed without a successful renewal",
				"key", l.key, "token", l.token)
			// The store may still hold the key for us (a renewal that
			// landed but whose reply did not): free it for the others.
			w.c.releaseInBackground(l.key, l.id)
		}
	}
	for len(due) > 0 {
		n := min(len(due), maxRenewBatch)
		w.startRenew(ctx, due[:n:n], now)
		due = due[n:]
	}
	return wait
}

func (w *watchdog) startRenew(ctx context.Context, leases []*Lease, sent time.Time) {
	reqs := make([]driver.RenewRequest, len(leases))
	earliest := leases[0].watch.deadline
	for i, l := range leases {
		reqs[i] = driver.RenewRequest{Key: l.key, ID: l.id, TTL: l.ttl}
		earliest = minTime(earliest, l.watch.deadline)
	}
	w.callWG.Add(1)
	go func() {
		defer w.callWG.Done()
		// An answer after the earliest deadline is of no use to that lease
		// and the others will be retried.
		callCtx, cancel := context.WithDeadline(ctx, earliest)
		defer cancel()
		held, err := w.c.drv.Renew(callCtx, reqs)
		if err == nil && len(held) != len(reqs) {
			err = errShortRenew
		}
		select {
		case w.results <- renewal{leases: leases, sent: sent, held: held, err: err}:
		case <-ctx.Done():
		}
	}()
}

// apply records a renewal's answers.
func (w *watchdog) apply(r renewal) {
	now := w.c.cfg.now()
	var lost []*Lease
	w.mu.Lock()
	for i, l := range r.leases {
		st := &l.watch
		if st.index < 0 {
			continue // unlocked or already lost meanwhile
		}
		st.inflight = false
		switch {
		case r.err != nil:
			// Short TTLs need their retries inside the validity window.
			st.next = minTime(now.Add(min(w.c.cfg.retryDelay, l.ttl/6)), st.deadline)
		case r.held[i]:
			st.deadline = r.sent.Add(validity(l.ttl))
			st.next = r.sent.Add(l.ttl / 3)
		default:
			heap.Remove(&w.h, st.index)
			lost = append(lost, l)
			continue
		}
		w.h.update(st.index)
	}
	w.mu.Unlock()
	if r.err != nil {
		w.c.cfg.logger.Warn("dlock: renewal failed; will retry until the validity deadline",
			"leases", len(r.leases), "err", r.err)
	}
	for _, l := range lost {
		if l.end(ErrLockLost) {
			w.c.cfg.logger.Warn("dlock: lock lost: no longer held in the store", "key", l.key, "token", l.token)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// leaseHeap orders leases by their next watchdog event. Each entry keeps
// its wake time inline, so comparisons during sifting read the slice, not
// every lease (100k leases renewed every second sift a lot).
type leaseHeap []heapEntry

type heapEntry struct {
	wake time.Time
	l    *Lease
}

// update re-reads the wake time of the lease at i after its watch state
// changed, and restores the heap order.
func (h *leaseHeap) update(i int) {
	(*h)[i].wake = (*h)[i].l.watch.wake()
	heap.Fix(h, i)
}

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].l.watch.index = i
	h[j].l.watch.index = j
}
func (h *leaseHeap) Push(x any) {
	e := x.(heapEntry)
	e.l.watch.index = len(*h)
	*h = append(*h, e)
}
func (h *leaseHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = heapEntry{}
	e.l.watch.index = -1
	*h = old[:len(old)-1]
	return e
}

package engine

import (
	"context"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

const (
	// releaseTimeout bounds one background release call: past it the lock
	// is better left to expire than waited for.
	releaseTimeout = 5 * time.Second
	// closeDrainTimeout bounds how long Close spends releasing what is
	// left, however many leases and however slow the store.
	closeDrainTimeout = 5 * time.Second
	// closeCallTimeout bounds one release call at Close: a store that has
	// not answered a batch within it is taken to be out, and Close gives
	// up on the rest at once rather than spend closeDrainTimeout on it (a
	// service shutting down during an outage must not hang; what is not
	// released expires with its TTL). A live store answers a batch of
	// MaxBatch in milliseconds. Below a second, so that Close during an
	// outage returns within one, the driver's own closing included (the
	// etcd driver does not wait for a store that just left a release
	// unanswered).
	closeCallTimeout = 800 * time.Millisecond
	// maxQueuedReleases bounds the queue during an outage: a release is an
	// optimisation (the lock expires anyway), so beyond it the oldest are
	// dropped — they are the closest to expiring.
	maxQueuedReleases = 1 << 16
	// releaseRetryFirst is the wait before the first retry of an Unlock's
	// release that failed in the background; it doubles up to
	// releaseRetryMax.
	releaseRetryFirst = 50 * time.Millisecond
	releaseRetryMax   = time.Second
)

// releaser makes the best-effort releases nobody waits for: acquisitions
// whose reply was lost or came too late, leases lost at their deadline,
// Unlock calls whose context had ended or whose release failed (those are
// tried again until their TTL ends: addRetried), and every lease at Close. One
// goroutine sends them in batches of up to MaxBatch per driver call, so
// 100k releases at Close are a hundred calls, not 100k goroutines.
type releaser struct {
	e *Engine

	mu        sync.Mutex
	queue     []driver.ReleaseRequest
	dropped   int
	unbounded bool // Close has queued its leases: drop nothing from now on
	draining  bool // Close has begun: a failed or unanswered call ends the drain
	closing   bool // Close waits for the queue to empty
	drainBy   time.Time
	// retried are the releases of Unlock calls that failed (addRetried):
	// one whose call fails is sent again, releaseRetryFirst later and
	// twice as late each time up to releaseRetryMax, until its until.
	retried map[driver.ReleaseRequest]*retry
	waiting []driver.ReleaseRequest // retried releases waiting for their next try

	kick chan struct{}
	done chan struct{}
}

// retry is the state of a retried release.
type retry struct {
	until time.Time     // the lease's TTL after its Unlock: it has expired in the store by then
	wait  time.Duration // before the next try
	next  time.Time     // when the next try is due
}

func newReleaser(e *Engine) *releaser {
	r := &releaser{e: e, kick: make(chan struct{}, 1), done: make(chan struct{}),
		retried: make(map[driver.ReleaseRequest]*retry)}
	go r.loop()
	return r
}

// add queues a release; it never blocks. Beyond maxQueuedReleases the
// oldest are dropped, until Close (addAll) makes the queue unbounded.
func (r *releaser) add(req driver.ReleaseRequest) {
	r.mu.Lock()
	if len(r.queue) >= maxQueuedReleases && !r.unbounded {
		delete(r.retried, r.queue[0])
		r.queue = r.queue[1:]
		r.dropped++
	}
	r.queue = append(r.queue, req)
	r.mu.Unlock()
	r.signal()
}

// addRetried queues the release of a lease whose Unlock could not release
// it, to be tried again while it fails, until ttl from now: by then the
// lease has expired in the store (its last write was before now). An
// Unlock that ends a lease so leaves its lock held by nobody only for as
// long as the store refuses the release (a Cluster slot being migrated for
// longer than the driver's own retries, a brief outage), not for the rest
// of its TTL. It never blocks.
func (r *releaser) addRetried(req driver.ReleaseRequest, ttl time.Duration) {
	r.mu.Lock()
	if len(r.retried) < maxQueuedReleases {
		r.retried[req] = &retry{until: time.Now().Add(ttl), wait: releaseRetryFirst}
	}
	r.mu.Unlock()
	r.add(req)
}

// retryFailed schedules the retried releases of batch, whose call failed,
// for their next try, and forgets those past their until. Called with r.mu
// held.
func (r *releaser) retryFailed(batch []driver.ReleaseRequest) {
	now := time.Now()
	for _, req := range batch {
		rt, ok := r.retried[req]
		if !ok {
			continue
		}
		rt.next = now.Add(rt.wait)
		rt.wait = min(2*rt.wait, releaseRetryMax)
		if !rt.next.Before(rt.until) {
			delete(r.retried, req)
			continue
		}
		r.waiting = append(r.waiting, req)
	}
}

// takeDue moves the retried releases whose next try is due to the queue,
// and returns how long until the next one is (0 for none). Called with
// r.mu held.
func (r *releaser) takeDue() time.Duration {
	now := time.Now()
	var next time.Duration
	kept := r.waiting[:0]
	for _, req := range r.waiting {
		rt, ok := r.retried[req]
		if !ok {
			// Forgotten meanwhile: a queued copy was sent, or dropped
			// from a full queue (add). Nothing to try again.
			continue
		}
		if wait := rt.next.Sub(now); wait > 0 && !r.closing {
			kept = append(kept, req)
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		r.queue = append(r.queue, req) // due; or Close drains everything at once
	}
	r.waiting = kept
	return next
}

// addAll queues releases without the bound: Close's leases, which are
// already in memory, however many there are. Later adds (calls that Close
// aborts) no longer drop anything either, or they could drop these.
func (r *releaser) addAll(reqs []driver.ReleaseRequest) {
	r.mu.Lock()
	r.unbounded = true
	r.startDrain()
	r.queue = append(r.queue, reqs...)
	r.mu.Unlock()
	r.signal()
}

// startDrain starts Close's drain, once: from now on a call is bounded by
// closeCallTimeout and the drain by closeDrainTimeout. Called with r.mu
// held.
func (r *releaser) startDrain() {
	if !r.draining {
		r.draining = true
		r.drainBy = r.e.now().Add(closeDrainTimeout)
	}
}

func (r *releaser) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// pending returns how many releases wait to be sent.
func (r *releaser) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// close sends what is queued, for at most closeDrainTimeout in all and
// until a call fails or goes unanswered for closeCallTimeout, and stops the
// goroutine.
func (r *releaser) close() {
	r.mu.Lock()
	r.closing = true
	r.startDrain()
	r.mu.Unlock()
	r.signal()
	<-r.done
}

func (r *releaser) loop() {
	defer close(r.done)
	var timer *time.Timer // the next retry's, made on first use
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r.mu.Lock()
		nextRetry := r.takeDue()
		n := min(len(r.queue), r.e.caps.MaxBatch)
		batch := append([]driver.ReleaseRequest(nil), r.queue[:n]...)
		r.queue = r.queue[n:]
		if len(r.queue) == 0 {
			r.queue = nil // let a drained burst's backing array go
		}
		closing, draining, drainBy, dropped := r.closing, r.draining, r.drainBy, r.dropped
		r.dropped = 0
		r.mu.Unlock()
		if dropped > 0 {
			r.e.log.warn("dlock: background release queue full; dropped the oldest (they expire with their TTL)", "dropped", dropped)
		}
		if len(batch) == 0 {
			if closing {
				return
			}
			r.await(&timer, nextRetry)
			continue
		}
		timeout := releaseTimeout
		if draining {
			timeout = min(closeCallTimeout, drainBy.Sub(r.e.now()))
			if timeout <= 0 {
				r.giveUp(len(batch))
				return
			}
		}
		// Not the engine's context: Close cancels that before it drains.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := r.e.drv.Release(ctx, batch)
		cancel()
		r.mu.Lock()
		if err != nil && !draining {
			r.retryFailed(batch)
		} else {
			for _, req := range batch {
				delete(r.retried, req)
			}
		}
		r.mu.Unlock()
		if err != nil {
			r.e.backendError("background release", batch[0].Kind, "", err)
			r.e.log.debug("dlock: best-effort release failed; the locks expire with their TTL (an Unlock's is retried until then)", "locks", len(batch), "err", err)
			if draining {
				r.giveUp(0)
				return
			}
		}
	}
}

// await waits for a release to be queued, or for the next retry, due in
// next (0 for none).
func (r *releaser) await(timer **time.Timer, next time.Duration) {
	if next == 0 {
		<-r.kick
		return
	}
	if *timer == nil {
		*timer = time.NewTimer(next)
	} else {
		(*timer).Reset(next)
	}
	select {
	case <-r.kick:
	case <-(*timer).C:
	}
}

// giveUp ends Close's drain with left plus what is still queued unsent.
func (r *releaser) giveUp(left int) {
	if left += r.pending(); left > 0 {
		r.e.log.warn("dlock: close: gave up releasing; those locks expire with their TTL", "left", left)
	}
}

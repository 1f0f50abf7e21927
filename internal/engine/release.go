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
)

// releaser makes the best-effort releases nobody waits for: acquisitions
// whose reply was lost or came too late, leases lost at their deadline,
// Unlock calls whose context had ended, and every lease at Close. One
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

	kick chan struct{}
	done chan struct{}
}

func newReleaser(e *Engine) *releaser {
	r := &releaser{e: e, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go r.loop()
	return r
}

// add queues a release; it never blocks. Beyond maxQueuedReleases the
// oldest are dropped, until Close (addAll) makes the queue unbounded.
func (r *releaser) add(req driver.ReleaseRequest) {
	r.mu.Lock()
	if len(r.queue) >= maxQueuedReleases && !r.unbounded {
		r.queue = r.queue[1:]
		r.dropped++
	}
	r.queue = append(r.queue, req)
	r.mu.Unlock()
	r.signal()
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
	for {
		r.mu.Lock()
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
			<-r.kick
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
		if err != nil {
			r.e.backendError("background release", batch[0].Kind, "", err)
			r.e.log.debug("dlock: best-effort release failed; the locks expire with their TTL", "locks", len(batch), "err", err)
			if draining {
				r.giveUp(0)
				return
			}
		}
	}
}

// giveUp ends Close's drain with left plus what is still queued unsent.
func (r *releaser) giveUp(left int) {
	if left += r.pending(); left > 0 {
		r.e.log.warn("dlock: close: gave up releasing; those locks expire with their TTL", "left", left)
	}
}

// Package engine holds what is the same for every dlock primitive and every
// backend: lease bookkeeping and validity deadlines (hold.go), one
// acquisition attempt (acquire.go), calls that a context can abandon
// (call.go, on the goroutines of callers.go), batched renewal (renew.go),
// batched and bounded background release (release.go), waiting by
// notification (wait.go), waiting in the store's queue (queue.go, with the
// grant announcements of grants.go), and logging that never blocks
// (logger.go). It knows nothing of dlock.Client: the root package turns
// user calls into driver requests and hands them to an Engine.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Config is what an Engine needs.
type Config struct {
	Driver driver.Driver
	// Logger receives renewal failures and lost leases, through a queue:
	// a handler that blocks never delays the engine.
	Logger *slog.Logger
	// RetryDelay is how soon a renewal that failed with a backend error is
	// retried (at most; see renew.go).
	RetryDelay time.Duration
	// Now is the clock; it must carry a monotonic reading (time.Now does).
	// Replaced in tests.
	Now func() time.Time
	// Observer, if set, receives events through a bounded queue (observe.go).
	Observer Observer
}

// Engine runs the leases of one client against one driver.
type Engine struct {
	drv        driver.Driver
	caps       driver.Capabilities
	now        func() time.Time
	epoch      time.Time
	retryDelay time.Duration

	log      *asyncLogger
	renewer  *renewer
	releaser *releaser
	waits    *waitRegistry
	queue    *queueWaits    // queued leases' grant announcements (queue.go)
	callers  *callers       // goroutines for calls a context may abandon (callers.go)
	obs      *observerQueue // nil without an Observer
	stats    stats

	ctx    context.Context // cancelled by Close: aborts calls in flight
	cancel context.CancelFunc

	closeOnce sync.Once
	closed    chan struct{}

	settled settledReleases // see there
	// The Client's Unlocks and (where the driver is a QueueBatcher)
	// Enqueues, batched (batch.go); enqueues.send is nil without one.
	releases batcher[driver.ReleaseRequest, driver.ReleaseResult]
	enqueues batcher[driver.QueueRequest, driver.QueueResult]

	opMu      sync.Mutex
	opStopped bool           // set by Close before it waits for ops
	ops       sync.WaitGroup // acquisitions and unlocks in flight, abandoned ones included
}

// New starts an engine on cfg.Driver.
func New(cfg Config) (*Engine, error) {
	if cfg.Driver == nil {
		return nil, fmt.Errorf("%w: nil driver", driver.ErrInvalid)
	}
	caps := cfg.Driver.Capabilities()
	if caps.TTLUnit <= 0 || caps.MinTTL < caps.TTLUnit || caps.MaxBatch <= 0 || caps.ExpiryMargin < 0 {
		return nil, fmt.Errorf("%w: driver capabilities %+v", driver.ErrInvalid, caps)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Engine{
		drv:        cfg.Driver,
		caps:       caps,
		now:        cfg.Now,
		epoch:      cfg.Now(),
		retryDelay: cfg.RetryDelay,
		closed:     make(chan struct{}),
	}
	e.settled.seed = maphash.MakeSeed()
	e.releases.e, e.releases.sendOne, e.releases.send = e, e.sendRelease, e.sendReleases
	if qb, ok := cfg.Driver.(driver.QueueBatcher); ok && !caps.ContextAware {
		e.enqueues.e, e.enqueues.sendOne, e.enqueues.send = e, qb.Enqueue, qb.EnqueueBatch
		e.enqueues.late = func(req driver.QueueRequest, _ driver.QueueResult, _ error) {
			e.releaser.add(placeOf(req)) // nobody will use what it queued or granted
		}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.log = newAsyncLogger(cfg.Logger)
	e.renewer = newRenewer(e)
	e.releaser = newReleaser(e)
	e.waits = newWaitRegistry(e)
	e.queue = newQueueWaits(e)
	e.callers = newCallers()
	if cfg.Observer != nil {
		e.obs = newObserverQueue(cfg.Observer)
	}
	return e, nil
}

// timerSlack is the part of the drift margin that covers how late the
// renewal loop closes Done after a deadline: Go's timers fire about 1 ms
// late on an idle Linux machine (BenchmarkDoneLateness; its figures are in
// docs/benchmarks.md). Err does not need it: it reads the clock.
const timerSlack = 2 * time.Millisecond

// drift is the safety margin subtracted from a lease's validity: 1% of the
// TTL for clock-rate differences between client and store, the store's own
// expiry margin, and timerSlack.
func (e *Engine) drift(ttl time.Duration) time.Duration {
	return ttl/100 + e.caps.ExpiryMargin + timerSlack
}

// MinTTL is the shortest TTL a lease may have on a driver with caps: the
// driver's minimum, and at least long enough that the drift margin leaves
// half of it valid (a shorter lease would be over before most round trips
// return).
func MinTTL(caps driver.Capabilities) time.Duration {
	fixed := caps.ExpiryMargin + timerSlack
	// ttl - ttl/100 - fixed >= ttl/2  ⇔  ttl >= fixed * 100/49
	m := max(caps.MinTTL, fixed*100/49+1)
	if r := m % caps.TTLUnit; r != 0 {
		m += caps.TTLUnit - r
	}
	return m
}

// validity is how long a lease may be believed held after its acquire or
// renew request was sent. The store cannot expire the key earlier: its
// countdown starts when the request arrives, after it was sent.
func (e *Engine) validity(ttl time.Duration) time.Duration { return ttl - e.drift(ttl) }

// sinceEpoch is the current time as a deadline value.
func (e *Engine) sinceEpoch() int64 { return int64(e.now().Sub(e.epoch)) }

// observing keeps Close from closing the observer queue while a call that
// may change what is held has still to queue its event: Close waits for
// ops before it closes the queue, so the event of a call that raced Close,
// queued after the call's last op ended, would otherwise be dropped — an
// acquisition or release missing from the events, and a gauge built on
// them off for good. Every wait of such a call also watches e.closed, so
// Close is not held up by it. Call the returned func once the event is
// queued.
func (e *Engine) observing() (done func()) {
	if e.obs == nil || !e.beginOp() {
		return func() {}
	}
	return e.ops.Done
}

func (e *Engine) isClosed() bool {
	select {
	case <-e.closed:
		return true
	default:
		return false
	}
}

// beginOp registers a call that Close must wait for; false once closing.
func (e *Engine) beginOp() bool {
	e.opMu.Lock()
	defer e.opMu.Unlock()
	if e.opStopped {
		return false
	}
	e.ops.Add(1)
	return true
}

// Close ends every lease at once with ErrClosed — before anything that
// could take time, so that no lease reports itself held while Close waits —
// then aborts calls in flight and waits for them (an acquisition that
// completes meanwhile is released), stops waiting calls, releases the ended
// leases in batches (bounded in time), and stops every goroutine. It does
// not close the driver.
func (e *Engine) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.closed)
		held := e.renewer.stop()
		reqs := make([]driver.ReleaseRequest, len(held))
		for i, h := range held {
			// Only a hold this call ended gets an end event: one that had
			// ended already (an Unlock racing Close, a deadline noticed by
			// Err) has had its own, and each lease ends once in the events.
			// Every one is released: the store may still hold it.
			if h.end(ErrClosed) {
				e.lostEvent(h, LostClosed)
			}
			reqs[i] = h.releaseRequest()
		}
		e.releaser.addAll(reqs)
		e.cancel()
		e.opMu.Lock()
		e.opStopped = true
		e.opMu.Unlock()
		e.ops.Wait()
		e.callers.close()
		err = errors.Join(e.waits.close(), e.queue.close())
		e.renewer.wait()
		e.releaser.close()
		e.log.close()
		if e.obs != nil {
			e.obs.close()
		}
	})
	return err
}

// Release releases h if it is still held, and ends it either way: its
// renewal stops at once. It returns nil when the lock was released (also
// when an earlier attempt released it but its reply was lost), ErrNotHeld
// when it had been lost, a backend error when the store failed (calling
// Release again retries; meanwhile the release is retried in the
// background until it works or the lease's TTL ends: addRetried), and an
// error matching ctx.Err() when ctx ended first (the release then happens
// in the background, bounded in time). A definitive answer (nil or
// ErrNotHeld) is remembered and returned again without a round trip.
//
// A nil ctx is an invalid argument: the hold still ends and is released in
// the background (unless an earlier call already gave the answer).
func (e *Engine) Release(ctx context.Context, h *Hold) error {
	if h.answered() {
		return e.release(ctx, h) // the remembered answer: nothing to observe
	}
	defer e.observing()()
	start := e.observeStart()
	err := e.release(ctx, h)
	e.doneRelease(ctx, h, start, err)
	return err
}

func (e *Engine) release(ctx context.Context, h *Hold) error {
	// Err ends the hold as lost if its deadline has passed, even when the
	// renewal loop has not got to it yet.
	_ = h.Err()
	if !h.answered() {
		giveBack, err := h.unlock.take(ctx, e, h.key)
		if err != nil {
			return err
		}
		defer giveBack()
	}
	h.mu.Lock()
	if h.unlockDone {
		err := h.unlockErr
		h.mu.Unlock()
		return err
	}
	// A hold that was already lost answers ErrNotHeld even if the store
	// still had the key (lost at the deadline, just before expiry): its
	// holder stopped holding it then. The release below still cleans up.
	wasLost := errors.Is(h.reason, ErrLost)
	h.mu.Unlock()

	// The op comes first: a hold is untracked only under an op, so Close
	// either finds it still tracked (and releases it) or waits for this
	// call, with the releaser still running for the background paths.
	if !e.beginOp() {
		return ErrClosed
	}
	defer e.ops.Done()
	e.renewer.remove(h)
	h.end(ErrReleased)
	if ctx == nil {
		e.releaser.addRetried(h.releaseRequest(), h.ttl)
		return fmt.Errorf("%w: unlock %q: nil context (released in the background)", driver.ErrInvalid, h.key)
	}
	if ctx.Err() != nil {
		e.releaser.addRetried(h.releaseRequest(), h.ttl)
		return ctxError("unlock", h.key, ctx.Err())
	}
	req := h.releaseRequest()
	req.Settled = e.settled.of(h.key)
	res, err := e.releaseOne(ctx, req)
	if err != nil {
		// Retried in the background until it works or the TTL ends
		// (addRetried): the lock is not left held by nobody meanwhile.
		e.releaser.addRetried(h.releaseRequest(), h.ttl)
		switch {
		case ctx.Err() != nil:
			return ctxError("unlock", h.key, ctx.Err())
		case e.isClosed():
			return ErrClosed // Close aborted the call; it sends the queued release
		}
		return WrapBackend("unlock", h.key, err)
	}
	var answer error
	if res == driver.NotHeld || wasLost {
		answer = ErrNotHeld
	} else {
		e.settled.settle(h.key, h.id)
	}
	h.mu.Lock()
	h.unlockDone, h.unlockErr = true, answer
	h.mu.Unlock()
	return answer
}

// releaseOne sends one Unlock's release: in the next batch of the
// Client's releases (batch.go), or, for a ContextAware driver, in a call
// of its own on the caller's goroutine.
func (e *Engine) releaseOne(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	if !e.caps.ContextAware {
		return e.releases.do(ctx, req)
	}
	return call(e, ctx, func(ctx context.Context) (driver.ReleaseResult, error) {
		return e.sendRelease(ctx, req)
	}, nil)
}

// sendRelease is the driver call of one release.
func (e *Engine) sendRelease(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	res, err := e.drv.Release(ctx, []driver.ReleaseRequest{req})
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("driver answered %d results for one release", len(res))
	}
	if err != nil {
		return 0, err
	}
	return res[0], nil
}

// sendReleases is the driver call of a batch of releases.
func (e *Engine) sendReleases(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, []error) {
	res, err := e.drv.Release(ctx, reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("driver answered %d results for %d releases", len(res), len(reqs))
	}
	errs := make([]error, len(reqs))
	if err != nil {
		res = make([]driver.ReleaseResult, len(reqs))
		for i := range errs {
			errs[i] = err
		}
	}
	return res, errs
}

func newOwnerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

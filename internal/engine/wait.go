package engine

import (
	"context"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// unknownWait bounds a wait when the store could not say how long the
// holder's lock has left (a lock without expiry written by hand, say).
const unknownWait = time.Second

// waitRegistry lets all waiting calls of an engine share one notification
// stream. Waiters for a key queue up in arrival order; a release
// notification wakes only the first, so one release costs this client one
// acquisition attempt however many goroutines wait. Every waiter also wakes
// after the holder's remaining TTL, so a lost notification costs at most one
// TTL, never a hang.
type waitRegistry struct {
	e *Engine

	mu      sync.Mutex
	watcher driver.Watcher // opened on first use
	queues  map[string]*keyQueue
	// idle keeps the subscriptions of keys nobody waits for any more, most
	// recently used last: a key that is waited for again (the common case
	// under contention) skips a subscribe round trip. At most maxIdleWatches.
	idle   []string
	closed bool
	bg     sync.WaitGroup // Removes in flight; Add under mu while !closed
}

// maxIdleWatches bounds the subscriptions kept for keys without waiters.
const maxIdleWatches = 256

// keyQueue is the waiters for one key, in arrival order.
type keyQueue struct {
	waiters    []*waiter
	subscribed bool // the watcher confirmed the subscription
}

type waiter struct {
	wake chan struct{} // buffered 1: a notification is never lost between attempts
}

func newWaitRegistry(e *Engine) *waitRegistry {
	return &waitRegistry{e: e, queues: make(map[string]*keyQueue)}
}

// waitFor is how long a waiter sleeps, at most, after an attempt found
// the lock busy with retryAfter left. A lock about to expire (0) is tried
// again after one store time unit — every crash takeover goes this way,
// since expiry sends no notification.
func (e *Engine) waitFor(retryAfter, ttl time.Duration) time.Duration {
	switch {
	case retryAfter > 0:
		return retryAfter
	case retryAfter == 0:
		return e.caps.TTLUnit
	}
	return min(unknownWait, ttl)
}

// wait is Acquire's slow path: the first attempt found the lock busy.
func (e *Engine) wait(ctx context.Context, a Attempt) (*Hold, error) {
	w, err := e.waits.join(ctx, a.Key)
	if err != nil {
		return nil, err
	}
	observed := e.waiting(a, true, false)
	defer func() { e.waiting(a, false, observed) }() // after leave: the depth it reports is the queue's without w
	defer e.waits.leave(a.Key, w)
	timer := time.NewTimer(0)
	defer timer.Stop()
	woken := false // this waiter took a release notification it has not used yet
	for {
		// Attempt after joining: a release between the first attempt and the
		// subscription would otherwise go unnoticed for a whole TTL.
		h, retry, err := e.patientAttempt(ctx, a, true)
		if h != nil {
			return h, nil
		}
		if err != nil {
			if woken {
				// The turn it was woken for goes to the next waiter (leave
				// passes a pending wake-up on).
				w.signal()
			}
			return nil, err
		}
		woken = false
		timer.Reset(e.waitFor(retry, a.TTL))
		select {
		case <-w.wake:
			woken = true
		case <-timer.C:
		case <-e.closed:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctxError("lock", a.Key, ctx.Err())
		}
	}
}

// join queues a waiter for key, subscribing to the key's release
// notifications if it is the first (and the key has no idle subscription).
// A failed subscription degrades to waking on the TTL fallback alone
// (logged), since waiting still works.
func (r *waitRegistry) join(ctx context.Context, key string) (*waiter, error) {
	w := &waiter{wake: make(chan struct{}, 1)}
	if err := r.joinWith(ctx, key, w); err != nil {
		return nil, err
	}
	return w, nil
}

// joinWith is join for a given waiter, which may wait for several keys
// (see waitall.go).
func (r *waitRegistry) joinWith(ctx context.Context, key string, w *waiter) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	q := r.queues[key]
	if q != nil {
		q.waiters = append(q.waiters, w)
		r.mu.Unlock()
		return nil
	}
	q = &keyQueue{waiters: []*waiter{w}}
	r.queues[key] = q
	if r.unidle(key) {
		q.subscribed = true
		r.mu.Unlock()
		return nil
	}
	watcher, err := r.watcherLocked()
	r.mu.Unlock()
	if err == nil {
		// Through Call, so that a driver whose subscription is stuck on a
		// slow store cannot hold Lock past ctx.
		_, err = Call(r.e, ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, watcher.Add(ctx, key)
		})
	}
	if err == nil {
		r.mu.Lock()
		q.subscribed = true
		r.mu.Unlock()
		return nil
	}
	if ctx.Err() != nil {
		r.leave(key, w)
		return ctxError("lock", key, ctx.Err())
	}
	r.e.log.warn("dlock: release notifications unavailable; waiting on TTL only", "key", key, "err", err)
	return nil
}

// unidle takes key off the idle list, reporting whether it was there.
func (r *waitRegistry) unidle(key string) bool {
	for i, k := range r.idle {
		if k == key {
			r.idle = append(r.idle[:i], r.idle[i+1:]...)
			return true
		}
	}
	return false
}

func (r *waitRegistry) watcherLocked() (driver.Watcher, error) {
	if r.watcher != nil {
		return r.watcher, nil
	}
	w, err := r.e.drv.Watch(r.notify)
	if err != nil {
		return nil, err
	}
	r.watcher = w
	return w, nil
}

// leave removes w from key's queue. If w was first, the next waiter inherits
// the turn (and a pending wake-up). When the last waiter leaves, the key's
// subscription goes on the idle list, and the oldest idle one beyond
// maxIdleWatches is dropped.
func (r *waitRegistry) leave(key string, w *waiter) {
	r.mu.Lock()
	q := r.queues[key]
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			select {
			case <-w.wake:
				q.waiters[0].signal()
			default:
			}
		}
		break
	}
	if len(q.waiters) > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.queues, key)
	var drop string
	switch {
	case !q.subscribed:
		// Add failed or was cancelled: the watcher may still count it.
		drop = key
	case r.closed:
	default:
		r.idle = append(r.idle, key)
		if len(r.idle) > maxIdleWatches {
			drop = r.idle[0]
			r.idle = r.idle[1:]
		}
	}
	watcher := r.watcher
	closed := r.closed
	if drop != "" && watcher != nil && !closed {
		// Off the caller's path: leave runs as Lock returns, and a Remove
		// may wait behind a subscription stuck on a slow store.
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = watcher.Remove(ctx, drop) // a stale subscription only costs messages
		}()
	}
	r.mu.Unlock()
}

// notify is called by the driver for every release of a followed key.
func (r *waitRegistry) notify(key string) {
	r.mu.Lock()
	if q := r.queues[key]; q != nil && len(q.waiters) > 0 {
		q.waiters[0].signal()
	}
	r.mu.Unlock()
}

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (r *waitRegistry) close() error {
	r.mu.Lock()
	r.closed = true
	watcher := r.watcher
	r.mu.Unlock()
	var err error
	if watcher != nil {
		err = watcher.Close()
	}
	r.bg.Wait()
	return err
}

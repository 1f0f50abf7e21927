package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// fallbackWait bounds a wait when the store did not say how long the
// holder's lock has left (e.g. a lock without expiry written by hand).
const fallbackWait = time.Second

// waitRegistry lets all Lock calls of a Client share one notification
// stream. Waiters for a key queue up in arrival order; a release
// notification wakes only the first, so one release costs this client one
// acquisition attempt however many goroutines wait. Every waiter also wakes
// after the holder's remaining TTL, so a lost notification costs at most one
// TTL, never a hang.
type waitRegistry struct {
	c *Client

	mu      sync.Mutex
	watcher driver.Watcher // opened on first use
	queues  map[string][]*waiter
	closed  bool
}

type waiter struct {
	wake chan struct{} // buffered 1: a notification is never lost between attempts
}

func newWaitRegistry(c *Client) *waitRegistry {
	return &waitRegistry{c: c, queues: make(map[string][]*waiter)}
}

// wait is Lock's slow path: the first attempt found the lock busy.
func (c *Client) wait(ctx context.Context, req driver.AcquireRequest, lc lockConfig) (*Lease, error) {
	w, err := c.waits.join(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	defer c.waits.leave(req.Key, w)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		// Attempt after joining: a release between the first attempt and the
		// subscription would otherwise go unnoticed for a whole TTL.
		lease, retry, err := c.patientAttempt(ctx, req, lc)
		if lease != nil || err != nil {
			return lease, err
		}
		if retry <= 0 {
			retry = min(fallbackWait, lc.ttl)
		}
		timer.Reset(retry)
		select {
		case <-w.wake:
		case <-timer.C:
		case <-c.closed:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("dlock: lock %q: %w", req.Key, ctx.Err())
		}
	}
}

// join queues a waiter for key, subscribing to the key's release
// notifications if it is the first. A failed subscription degrades to
// waking on the TTL fallback alone (logged), since waiting still works.
func (r *waitRegistry) join(ctx context.Context, key string) (*waiter, error) {
	w := &waiter{wake: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	q := r.queues[key]
	r.queues[key] = append(q, w)
	first := len(q) == 0
	watcher, err := r.watcherLocked()
	r.mu.Unlock()
	if err == nil && first {
		err = watcher.Add(ctx, key)
	}
	if err != nil {
		if ctx.Err() != nil {
			r.leave(key, w)
			return nil, fmt.Errorf("dlock: lock %q: %w", key, ctx.Err())
		}
		r.c.cfg.logger.Warn("dlock: release notifications unavailable; waiting on TTL only", "key", key, "err", err)
	}
	return w, nil
}

func (r *waitRegistry) watcherLocked() (driver.Watcher, error) {
	if r.watcher != nil {
		return r.watcher, nil
	}
	w, err := r.c.drv.Watch(r.notify)
	if err != nil {
		return nil, err
	}
	r.watcher = w
	return w, nil
}

// leave removes w from key's queue. If w was first, the next waiter inherits
// the turn (and a pending wake-up); the last waiter unsubscribes.
func (r *waitRegistry) leave(key string, w *waiter) {
	r.mu.Lock()
	q := r.queues[key]
	for i, x := range q {
		if x != w {
			continue
		}
		q = append(q[:i], q[i+1:]...)
		if i == 0 && len(q) > 0 {
			select {
			case <-w.wake:
				q[0].signal()
			default:
			}
		}
		break
	}
	if len(q) > 0 {
		r.queues[key] = q
		r.mu.Unlock()
		return
	}
	delete(r.queues, key)
	watcher := r.watcher
	r.mu.Unlock()
	if watcher != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = watcher.Remove(ctx, key) // a stale subscription only costs messages
	}
}

// notify is called by the driver for every release of a followed key.
func (r *waitRegistry) notify(key string) {
	r.mu.Lock()
	if q := r.queues[key]; len(q) > 0 {
		q[0].signal()
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
	if watcher != nil {
		return watcher.Close()
	}
	return nil
}

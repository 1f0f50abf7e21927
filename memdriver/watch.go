package memdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

var errWatcherClosed = errors.New("memdriver: watcher closed")

// watcher delivers release notifications from a goroutine of its own. A
// release only appends to its queue, so a slow callback delays later
// callbacks but never the store or the caller of Release.
type watcher struct {
	d         *Driver
	onRelease func(key string)
	// keys counts Adds minus Removes per key, guarded by the store's mu.
	// Counting, as the Redis driver does, lets two waiters on one key come
	// and go independently: the key is followed until both have left.
	keys map[string]int

	mu     sync.Mutex // guards queue and closed; taken after the store's mu
	queue  []string
	closed bool

	wake      chan struct{} // capacity 1: "the queue may be non-empty"
	done      chan struct{} // closed when the goroutine exits
	closeOnce sync.Once
}

// Watch implements driver.Driver. onRelease is called from one goroutine
// per Watcher, in the order of the releases, with the key of every lock
// released (by Release or ForceRelease, not by expiry) while the Watcher
// followed it. Notifications queued before a Remove may still be
// delivered after it. The callback may call the Driver, but not Close on
// the Watcher or the Driver that made it: Close waits for the callback to
// return.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	w := &watcher{
		d:         d,
		onRelease: onRelease,
		keys:      make(map[string]int),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	go w.run()
	_, err := run(context.Background(), d, OpWatch, func(s *store, _ time.Time) (struct{}, error) {
		s.watchers[w] = struct{}{}
		return struct{}{}, nil
	})
	if err != nil {
		w.Close()
		return nil, err
	}
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		w.Close()
		return nil, ErrClosed
	}
	d.watchers[w] = struct{}{}
	d.mu.Unlock()
	return w, nil
}

// Add implements driver.Watcher. The key is followed when Add returns:
// a release applied after that is delivered.
func (w *watcher) Add(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := run(ctx, w.d, OpWatchAdd, func(s *store, _ time.Time) (struct{}, error) {
		if w.isClosed() {
			return struct{}{}, errWatcherClosed
		}
		w.keys[key]++
		return struct{}{}, nil
	})
	return err
}

// Remove implements driver.Watcher. It undoes one Add of key; removing a
// key that is not followed, or from a closed Watcher, does nothing.
func (w *watcher) Remove(ctx context.Context, key string) error {
	_, err := run(ctx, w.d, OpWatchRemove, func(s *store, _ time.Time) (struct{}, error) {
		if n := w.keys[key]; n > 1 {
			w.keys[key] = n - 1
		} else {
			delete(w.keys, key)
		}
		return struct{}{}, nil
	})
	return err
}

// Close implements driver.Watcher. It drops undelivered notifications,
// waits for a callback in progress to return, and stops the goroutine. It
// is idempotent and returns nil.
func (w *watcher) Close() error {
	w.closeOnce.Do(func() {
		s := w.d.s
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()

		w.d.mu.Lock()
		delete(w.d.watchers, w) // nil map after Driver.Close: a no-op
		w.d.mu.Unlock()

		w.mu.Lock()
		w.closed = true
		w.queue = nil
		w.mu.Unlock()
		w.signal()
		<-w.done
	})
	return nil
}

func (w *watcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// push queues a notification; called with the store's mu held.
func (w *watcher) push(key string) {
	w.mu.Lock()
	if !w.closed {
		w.queue = append(w.queue, key)
	}
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // already signalled; the goroutine drains the whole queue
	}
}

// run delivers queued notifications one at a time, checking for Close
// between callbacks so that Close waits for one callback at most.
func (w *watcher) run() {
	defer close(w.done)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.closed {
				w.mu.Unlock()
				return
			}
			if len(w.queue) == 0 {
				w.queue = nil // let a burst's backing array go
				w.mu.Unlock()
				break
			}
			key := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			w.onRelease(key)
		}
	}
}

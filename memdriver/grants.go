package memdriver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// grantWatcher delivers the grants announced on one inbox from a
// goroutine of its own: a grant only appends to its queue, so a slow
// callback never delays the store.
type grantWatcher struct {
	d       *Driver
	s       *store
	inbox   string
	onGrant func(driver.Grant)

	mu     sync.Mutex // taken after the store's mu
	queue  []driver.Grant
	closed bool

	wake      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// WatchGrants implements driver.Queuer. The subscription is in place when
// it returns; Close waits for a callback in progress, so the callback must
// not call Close.
func (d *Driver) WatchGrants(ctx context.Context, inbox string, onGrant func(driver.Grant)) (driver.GrantWatcher, error) {
	if onGrant == nil || inbox == "" {
		return nil, fmt.Errorf("%w: memdriver: grant watcher needs an inbox and a callback", driver.ErrInvalid)
	}
	w := &grantWatcher{d: d, s: d.s, inbox: inbox, onGrant: onGrant,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	_, err := run(ctx, d, OpWatchGrants, func(s *store, _ time.Time) (struct{}, error) {
		ws := s.inboxes[inbox]
		if ws == nil {
			ws = make(map[*grantWatcher]struct{})
			s.inboxes[inbox] = ws
		}
		ws[w] = struct{}{}
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
	d.grants[w] = struct{}{}
	d.mu.Unlock()
	return w, nil
}

// announce queues g for the watchers of inbox; called with the store's mu.
func (s *store) announce(inbox string, g driver.Grant) {
	for w := range s.inboxes[inbox] {
		w.mu.Lock()
		if !w.closed {
			w.queue = append(w.queue, g)
		}
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Close implements driver.GrantWatcher; idempotent.
func (w *grantWatcher) Close() error {
	w.closeOnce.Do(func() {
		w.s.mu.Lock()
		if ws := w.s.inboxes[w.inbox]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(w.s.inboxes, w.inbox)
			}
		}
		w.s.mu.Unlock()
		w.d.mu.Lock()
		delete(w.d.grants, w) // nil map after Driver.Close: a no-op
		w.d.mu.Unlock()
		w.mu.Lock()
		w.closed = true
		w.queue = nil
		w.mu.Unlock()
		close(w.wake)
		<-w.done
	})
	return nil
}

func (w *grantWatcher) run() {
	defer close(w.done)
	for range w.wake {
		for {
			w.mu.Lock()
			if w.closed || len(w.queue) == 0 {
				w.queue = nil
				w.mu.Unlock()
				break
			}
			g := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			w.onGrant(g)
		}
	}
}

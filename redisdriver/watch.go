package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// confirmTimeout bounds how long Add waits for Redis to confirm a
// subscription. Waiters fall back to their TTL timer past it, so a store
// that is down never makes Lock hang in Add.
const confirmTimeout = 3 * time.Second

var errWatcherClosed = errors.New("release watcher closed")

// watcher is a client's one pub/sub connection, subscribed to the release
// channel of every key some local waiter is waiting for. In Cluster mode
// PUBLISH reaches every node, so one connection on any node hears all.
type watcher struct {
	d         *Driver
	onRelease func(string)

	// mu is held while SUBSCRIBE/UNSUBSCRIBE are written, so the order of
	// commands on the wire is the order of the decisions below.
	mu     sync.Mutex
	ps     *redis.PubSub // opened by the first Add
	subs   map[string]*subscription
	closed bool
	done   chan struct{} // closed when the reader goroutine exits
}

// subscription tracks one channel. Add and Remove are reference counted so
// that a Remove racing an Add for the same key never unsubscribes a waiter
// that just subscribed; unconfirmed counts SUBSCRIBEs whose confirmation
// has not arrived, so a late confirmation of an earlier subscription is not
// mistaken for the current one.
type subscription struct {
	refs        int
	unconfirmed int
	ready       chan struct{} // closed when refs > 0 and nothing is unconfirmed
}

// Watch implements driver.Driver.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	return &watcher{d: d, onRelease: onRelease, subs: make(map[string]*subscription)}, nil
}

func (w *watcher) Add(ctx context.Context, key string) error {
	ch := w.d.channel(key)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errWatcherClosed
	}
	s := w.subs[ch]
	if s == nil {
		s = &subscription{ready: make(chan struct{})}
		w.subs[ch] = s
	}
	s.refs++
	var err error
	if s.refs == 1 {
		s.unconfirmed++
		if s.unconfirmed == 1 {
			s.ready = make(chan struct{})
		}
		if w.ps == nil {
			// go-redis only writes SUBSCRIBE here; the confirmation arrives
			// on the message stream read below.
			w.ps = w.d.rdb.Subscribe(ctx, ch)
			w.done = make(chan struct{})
			go w.read(w.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
		} else {
			err = w.ps.Subscribe(ctx, ch)
		}
	}
	ready := s.ready
	w.mu.Unlock()
	if err != nil {
		return err
	}
	timer := time.NewTimer(confirmTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-timer.C:
		return fmt.Errorf("subscription to %q not confirmed within %v", ch, confirmTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *watcher) Remove(ctx context.Context, key string) error {
	ch := w.d.channel(key)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.subs[ch]
	if s == nil || s.refs == 0 || w.closed {
		return nil
	}
	s.refs--
	if s.refs > 0 {
		return nil
	}
	if s.unconfirmed == 0 {
		delete(w.subs, ch)
	}
	return w.ps.Unsubscribe(ctx, ch)
}

func (w *watcher) Close() error {
	w.mu.Lock()
	w.closed = true
	ps, done := w.ps, w.done
	w.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// read dispatches the pub/sub stream until the PubSub is closed.
func (w *watcher) read(msgs <-chan any) {
	defer close(w.done)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			if name, ok := w.d.nameFromChannel(m.Channel); ok {
				w.onRelease(name)
			}
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				w.confirmed(m.Channel)
			}
		}
	}
}

func (w *watcher) confirmed(ch string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.subs[ch]
	if s == nil || s.unconfirmed == 0 {
		return // a resubscription after reconnect, or a stale channel
	}
	s.unconfirmed--
	if s.unconfirmed > 0 {
		return
	}
	if s.refs == 0 {
		delete(w.subs, ch)
		return
	}
	close(s.ready)
}

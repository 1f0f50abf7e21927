package redisdriver

import (
	"context"
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

// watcher is a client's one pub/sub connection, subscribed to the release
// channel of every key some local waiter is waiting for. In Cluster mode
// PUBLISH reaches every node, so one connection on any node hears all.
type watcher struct {
	d         *Driver
	onRelease func(string)

	mu      sync.Mutex
	ps      *redis.PubSub              // opened by the first Add
	pending map[string][]chan struct{} // channel -> Adds awaiting confirmation
	closed  bool
	done    chan struct{} // closed when the reader goroutine exits
}

// Watch implements driver.Driver.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	return &watcher{d: d, onRelease: onRelease, pending: make(map[string][]chan struct{})}, nil
}

func (w *watcher) Add(ctx context.Context, key string) error {
	ch := w.d.channel(key)
	confirmed := make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("watcher closed")
	}
	w.pending[ch] = append(w.pending[ch], confirmed)
	var err error
	if w.ps == nil {
		// go-redis only writes SUBSCRIBE here; the confirmation arrives on
		// the message stream read below.
		w.ps = w.d.rdb.Subscribe(ctx, ch)
		w.done = make(chan struct{})
		go w.read(w.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	} else {
		err = w.ps.Subscribe(ctx, ch)
	}
	w.mu.Unlock()
	if err != nil {
		w.dropPending(ch, confirmed)
		return err
	}
	timer := time.NewTimer(confirmTimeout)
	defer timer.Stop()
	select {
	case <-confirmed:
		return nil
	case <-timer.C:
		w.dropPending(ch, confirmed)
		return fmt.Errorf("subscription to %q not confirmed within %v", ch, confirmTimeout)
	case <-ctx.Done():
		w.dropPending(ch, confirmed)
		return ctx.Err()
	}
}

func (w *watcher) dropPending(ch string, c chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.pending[ch]
	for i, x := range list {
		if x == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.pending, ch)
	} else {
		w.pending[ch] = list
	}
}

func (w *watcher) Remove(ctx context.Context, key string) error {
	w.mu.Lock()
	ps := w.ps
	w.mu.Unlock()
	if ps == nil {
		return nil
	}
	return ps.Unsubscribe(ctx, w.d.channel(key))
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
			if m.Kind != "subscribe" {
				continue
			}
			w.mu.Lock()
			for _, c := range w.pending[m.Channel] {
				close(c)
			}
			delete(w.pending, m.Channel)
			w.mu.Unlock()
		}
	}
}

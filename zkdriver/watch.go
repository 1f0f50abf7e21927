package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Watch implements driver.Driver. A followed name's Watcher watches the
// name's first node (its holder) for deletion, one ZooKeeper watch per
// name, and after each deletion the next first node: so a waiter hears
// of releases, forced releases, expiries and session ends of the holder,
// and not of other waiters coming and going.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	w := &watcher{d: d, onRelease: onRelease, keys: make(map[string]*keyWatch), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	w.wg.Add(1)
	go w.dispatch()
	return w, nil
}

type watcher struct {
	d         *Driver
	onRelease func(string)

	mu      sync.Mutex
	keys    map[string]*keyWatch
	pending []string // notifications not delivered yet, in order
	closed  bool

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

type keyWatch struct {
	key  string
	stop chan struct{}
	// emptyAt is the name's children version when the watch found no
	// child, -1 otherwise: a holder that came and went before the next
	// look shows as more child changes than children.
	emptyAt int32
}

// Add implements driver.Watcher: it returns once the name's first node is
// watched (or, on a free name, its children).
func (w *watcher) Add(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	if _, ok := w.keys[key]; ok {
		w.mu.Unlock()
		return nil
	}
	kw := &keyWatch{key: key, stop: make(chan struct{}), emptyAt: -1}
	w.keys[key] = kw
	w.mu.Unlock()
	ch, err := w.arm(kw)
	if err != nil {
		w.mu.Lock()
		if w.keys[key] == kw {
			delete(w.keys, key)
		}
		w.mu.Unlock()
		return err
	}
	w.wg.Add(1)
	go w.follow(kw, ch)
	return ctx.Err()
}

// arm sets the ZooKeeper watch that follows kw's name: on its first node,
// or, while it has none, on its children (or the name's node itself).
func (w *watcher) arm(kw *keyWatch) (<-chan zk.Event, error) {
	parent := w.d.nameNode(kw.key)
	for {
		names, st, err := w.d.conn.Children(parent)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("zkdriver: watch %q: %w", kw.key, err)
		}
		if st != nil && kw.emptyAt >= 0 && int(st.Cversion-kw.emptyAt) > len(names) {
			w.notify(kw.key) // a node was deleted since the name was seen empty
		}
		kw.emptyAt = -1
		cs := sortedChildren(names)
		if len(cs) == 0 {
			ok, _, ch, err := w.d.conn.ExistsW(parent)
			if err != nil {
				return nil, fmt.Errorf("zkdriver: watch %q: %w", kw.key, err)
			}
			if !ok {
				kw.emptyAt = 0 // a name's node is created with no children
				return ch, nil
			}
			_, st, ch, err = w.d.conn.ChildrenW(parent)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err == nil {
				kw.emptyAt = st.Cversion
			}
			return ch, err
		}
		ok, _, ch, err := w.d.conn.ExistsW(parent + "/" + cs[0].name)
		if err != nil {
			return nil, fmt.Errorf("zkdriver: watch %q: %w", kw.key, err)
		}
		if ok {
			return ch, nil
		}
		w.notify(kw.key) // gone between the two reads
	}
}

// follow waits for kw's watch to fire, announces a deletion of the first
// node, and watches again, until Remove or Close.
func (w *watcher) follow(kw *keyWatch, ch <-chan zk.Event) {
	defer w.wg.Done()
	for {
		select {
		case <-kw.stop:
			return
		case ev := <-ch:
			if ev.Type != zk.EventNodeCreated && ev.Type != zk.EventNodeChildrenChanged {
				// A deletion, or a watch lost with the session: either
				// way the waiter should look again.
				w.notify(kw.key)
			}
		}
		for {
			var err error
			if ch, err = w.arm(kw); err == nil {
				break
			}
			select {
			case <-kw.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func (w *watcher) notify(key string) {
	w.mu.Lock()
	if _, ok := w.keys[key]; !ok || w.closed {
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, key)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// dispatch calls onRelease for every pending notification, one at a time,
// so that a slow callback delays the others without dropping them.
func (w *watcher) dispatch() {
	defer w.wg.Done()
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		for {
			w.mu.Lock()
			if len(w.pending) == 0 || w.closed {
				w.mu.Unlock()
				break
			}
			key := w.pending[0]
			w.pending = w.pending[1:]
			_, following := w.keys[key]
			w.mu.Unlock()
			if following {
				w.onRelease(key)
			}
		}
	}
}

// Remove implements driver.Watcher.
func (w *watcher) Remove(_ context.Context, key string) error {
	w.mu.Lock()
	kw, ok := w.keys[key]
	delete(w.keys, key)
	w.mu.Unlock()
	if ok {
		close(kw.stop)
	}
	return nil
}

// Close implements driver.Watcher.
func (w *watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	for k, kw := range w.keys {
		close(kw.stop)
		delete(w.keys, k)
	}
	w.pending = nil
	w.mu.Unlock()
	close(w.stop)
	w.wg.Wait()
	return nil
}

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
	w := &watcher{d: d, keys: make(map[string]*keyWatch)}
	w.out = newMailbox(func(key string) {
		if w.following(key) {
			onRelease(key)
		}
	})
	return w, nil
}

type watcher struct {
	d   *Driver
	out *mailbox[string] // the notifications, to onRelease

	mu     sync.Mutex
	keys   map[string]*keyWatch
	closed bool

	wg sync.WaitGroup // the keys' watch goroutines
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

// wakes reports whether an event of the watched first node should wake
// the name's waiters: a deletion, or a watch lost with the session (either
// way they should look again). A holder's renewal writes its node's data:
// waking a plain waiter for it would cost a whole attempt every TTL/3.
func wakes(t zk.EventType) bool {
	switch t {
	case zk.EventNodeCreated, zk.EventNodeChildrenChanged, zk.EventNodeDataChanged:
		return false
	}
	return true
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
			if wakes(ev.Type) {
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
	if w.following(key) {
		w.out.post(key)
	}
}

// following reports whether key is still followed: a notification of a
// key removed since it was posted is not delivered.
func (w *watcher) following(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.keys[key]
	return ok && !w.closed
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
	w.mu.Unlock()
	w.wg.Wait()
	w.out.close()
	return nil
}

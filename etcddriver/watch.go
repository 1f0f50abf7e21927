package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rewatchDelay paces new watches of a key whose watch etcd ended (no
// leader, a member going away), so an outage does not become a busy loop.
const rewatchDelay = 100 * time.Millisecond

var errWatcherClosed = errors.New("release watcher closed")

// watcher follows the keys some local waiter waits for, two etcd watches
// per key (its exclusive holder, and its readers and permit holders). The
// etcd client carries every watch made with the same context metadata on
// one gRPC stream, so a Client has one stream however many keys it
// follows. Notifications are queued and delivered, in order, by
// one goroutine: a slow callback delays nothing else and loses nothing.
type watcher struct {
	d         *Driver
	onRelease func(string)
	ctx       context.Context // ends every watch on Close
	cancel    context.CancelFunc

	mu     sync.Mutex
	keys   map[string]*keyWatch
	queue  []string
	closed bool
	signal chan struct{} // capacity 1: the queue grew
	wg     sync.WaitGroup
}

// keyWatch is one followed key. Add and Remove are reference counted, so
// that a Remove racing an Add for the same key never drops a waiter that
// just subscribed.
type keyWatch struct {
	refs      int
	cancel    context.CancelFunc
	confirmed chan struct{} // closed once etcd created both first watches
	pending   atomic.Int32  // first watches not yet created
}

// created counts one first watch created, and confirms the key with the
// last.
func (kw *keyWatch) created() {
	if kw.pending.Add(-1) == 0 {
		close(kw.confirmed)
	}
}

// Watch implements driver.Driver.
func (d *Driver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	if onRelease == nil {
		return nil, fmt.Errorf("%w: nil release callback", driver.ErrInvalid)
	}
	w := &watcher{d: d, onRelease: onRelease, keys: make(map[string]*keyWatch), signal: make(chan struct{}, 1)}
	// A member cut off from the quorum ends watches that require a leader,
	// instead of leaving them silent.
	w.ctx, w.cancel = context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	w.wg.Add(1)
	go w.deliver()
	return w, nil
}

// Add implements driver.Watcher: it returns once etcd confirmed the watch
// of key, so every later deletion of the key is delivered.
func (w *watcher) Add(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errWatcherClosed
	}
	kw := w.keys[key]
	if kw == nil {
		kctx, cancel := context.WithCancel(w.ctx)
		kw = &keyWatch{cancel: cancel, confirmed: make(chan struct{})}
		kw.pending.Store(2)
		w.keys[key] = kw
		// The exclusive holder's key, and the range of the name's readers
		// and permit holders: a plain Lock refused while they held the name
		// waits for the last of them to leave as for a release.
		w.wg.Add(2)
		go w.follow(kctx, key, kw, w.d.lockKey(key))
		go w.follow(kctx, key, kw, w.d.holderPrefix(key), clientv3.WithPrefix())
	}
	kw.refs++
	w.mu.Unlock()
	select {
	case <-kw.confirmed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-w.ctx.Done():
		return errWatcherClosed
	}
}

// follow keeps a watch on the deletions of etcdKey (a range with
// rangeOpts), which are releases of key, until ctx ends, watching anew
// whenever etcd ends the watch (no leader, the member went away). A new
// watch resumes after the last revision seen, so no release in between is
// missed; if that revision was compacted meanwhile, it starts from now and
// wakes the waiters instead. The end of a watch that was live is delivered
// as a release too, once: the waiters try again (one attempt if the lock is
// still held) rather than sit on a member that lost its quorum.
func (w *watcher) follow(ctx context.Context, key string, kw *keyWatch, etcdKey string, rangeOpts ...clientv3.OpOption) {
	defer w.wg.Done()
	first := true
	var lastRev int64 // events up to here were delivered
	for ctx.Err() == nil {
		opts := append([]clientv3.OpOption{clientv3.WithFilterPut(), clientv3.WithCreatedNotify()}, rangeOpts...)
		if lastRev > 0 {
			opts = append(opts, clientv3.WithRev(lastRev+1))
		}
		live := false
		for resp := range w.d.cli.Watch(ctx, etcdKey, opts...) {
			if resp.Created {
				live = true
				if first {
					kw.created()
					first = false
				}
				if lastRev == 0 {
					lastRev = resp.Header.Revision // it watches from the next one
				}
				continue
			}
			if resp.CompactRevision != 0 {
				lastRev = 0 // what we would resume from is gone
				w.enqueue(key)
			}
			if resp.Canceled || resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events { // deletes only (WithFilterPut)
				lastRev = max(lastRev, ev.Kv.ModRevision)
				w.enqueue(key)
			}
		}
		if ctx.Err() != nil {
			return
		}
		if live {
			w.enqueue(key)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rewatchDelay):
		}
	}
}

func (w *watcher) enqueue(key string) {
	w.mu.Lock()
	w.queue = append(w.queue, key)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// deliver calls onRelease for each queued key still followed, one at a
// time.
func (w *watcher) deliver() {
	defer w.wg.Done()
	for {
		select {
		case <-w.signal:
		case <-w.ctx.Done():
			return
		}
		for {
			w.mu.Lock()
			if w.closed || len(w.queue) == 0 {
				w.mu.Unlock()
				break
			}
			key := w.queue[0]
			w.queue[0] = ""
			w.queue = w.queue[1:]
			_, followed := w.keys[key]
			w.mu.Unlock()
			if followed {
				w.onRelease(key)
			}
		}
	}
}

// Remove implements driver.Watcher.
func (w *watcher) Remove(ctx context.Context, key string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.keys[key]
	if kw == nil || w.closed {
		return nil
	}
	kw.refs--
	if kw.refs > 0 {
		return nil
	}
	delete(w.keys, key)
	kw.cancel()
	return nil
}

// Close implements driver.Watcher: it ends every watch and waits for the
// watcher's goroutines, including a callback in progress.
func (w *watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.queue = nil
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
	return nil
}

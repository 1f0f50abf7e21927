package engine

import (
	"context"
	"sync"

	"github.com/dlockio/dlock/driver"
)

// Grant announcements of queued acquisitions (queue.go): one inbox per
// engine, one subscription to it, opened by the first request that has to
// wait, and the waiting calls by owner id.

// queueWaits is an engine's side of grant announcements: one inbox, one
// subscription opened on first use, and the waiting calls by owner id.
type queueWaits struct {
	e     *Engine
	inbox string

	mu      sync.Mutex
	gw      driver.GrantWatcher
	opening chan struct{} // closed when a WatchGrants in flight ends
	waiters map[string]chan driver.Grant
	queued  map[string]int // waiting calls per key, for Stats and the observer
	closed  bool
}

func newQueueWaits(e *Engine) *queueWaits {
	return &queueWaits{e: e, inbox: newOwnerID(), waiters: make(map[string]chan driver.Grant), queued: make(map[string]int)}
}

// subscribe opens the engine's grant subscription if it is not open; one
// caller at a time tries, the others wait for its outcome.
func (qw *queueWaits) subscribe(ctx context.Context, q driver.Queuer, key string) error {
	for {
		qw.mu.Lock()
		switch {
		case qw.closed:
			qw.mu.Unlock()
			return ErrClosed
		case qw.gw != nil:
			qw.mu.Unlock()
			return nil
		case qw.opening != nil:
			ch := qw.opening
			qw.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctxError("lock", key, ctx.Err())
			}
		}
		ch := make(chan struct{})
		qw.opening = ch
		qw.mu.Unlock()
		gw, err := qw.open(ctx, q)
		qw.mu.Lock()
		qw.opening = nil
		close(ch)
		if err == nil {
			if qw.closed {
				qw.mu.Unlock()
				_ = gw.Close()
				return ErrClosed
			}
			qw.gw = gw
		}
		qw.mu.Unlock()
		return err
	}
}

func (qw *queueWaits) open(ctx context.Context, q driver.Queuer) (driver.GrantWatcher, error) {
	e := qw.e
	if !e.beginOp() {
		return nil, ErrClosed
	}
	defer e.ops.Done()
	return call(e, ctx, func(ctx context.Context) (driver.GrantWatcher, error) {
		return q.WatchGrants(ctx, qw.inbox, qw.onGrant)
	}, func(gw driver.GrantWatcher, err error) {
		if err == nil {
			_ = gw.Close() // abandoned: nobody will use it
		}
	})
}

// isOpen reports whether the grant subscription is open.
func (qw *queueWaits) isOpen() bool {
	qw.mu.Lock()
	defer qw.mu.Unlock()
	return qw.gw != nil
}

func (qw *queueWaits) register(id string) chan driver.Grant {
	ch := make(chan driver.Grant, 1)
	qw.mu.Lock()
	qw.waiters[id] = ch
	qw.mu.Unlock()
	return ch
}

// waiting counts a call that starts or stops waiting in key's queue; see
// Engine.waitChanged for observed and the result.
func (qw *queueWaits) waiting(kind driver.Kind, key string, started, observed bool) bool {
	d := -1
	if started {
		d = 1
	}
	qw.mu.Lock()
	if n := qw.queued[key] + d; n == 0 {
		delete(qw.queued, key)
	} else {
		qw.queued[key] = n
	}
	qw.mu.Unlock()
	return qw.e.waitChanged(kind, key, started, observed)
}

func (qw *queueWaits) unregister(id string) {
	qw.mu.Lock()
	delete(qw.waiters, id)
	qw.mu.Unlock()
}

// onGrant is the driver's callback; it never blocks.
func (qw *queueWaits) onGrant(g driver.Grant) {
	qw.mu.Lock()
	ch := qw.waiters[g.ID]
	qw.mu.Unlock()
	if ch != nil {
		select {
		case ch <- g:
		default:
		}
	}
}

func (qw *queueWaits) close() error {
	qw.mu.Lock()
	qw.closed = true
	gw := qw.gw
	qw.gw = nil
	qw.mu.Unlock()
	if gw != nil {
		return gw.Close()
	}
	return nil
}

package engine

import (
	"context"
	"sync"
)

// unlockTurn lets one Unlock call of a lease (or a group) at a time send
// its release. A call that came while another's release was in flight
// then finds that call's answer instead of sending its own: the store
// answers a duplicate release that arrives after the lock moved on (a
// hand-off, the next holder's own release) NOT_HELD, which would replace a
// remembered nil with ErrNotHeld. The zero value is ready.
type unlockTurn struct {
	mu sync.Mutex
	ch chan struct{} // capacity 1: full while a call has the turn
}

// take waits for the turn, or until ctx ends (nil: no bound) or the engine
// closes; a free turn is taken at once, whatever ctx. It returns the func
// that gives the turn back. A call that gave up waiting leaves the lease
// to the call that has the turn, which has ended it already.
func (u *unlockTurn) take(ctx context.Context, e *Engine, what string) (func(), error) {
	u.mu.Lock()
	if u.ch == nil {
		u.ch = make(chan struct{}, 1)
	}
	ch := u.ch
	u.mu.Unlock()
	select {
	case ch <- struct{}{}: // free: taken even with an ended ctx, whose call still ends the lease
		return func() { <-ch }, nil
	default:
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-done:
		return nil, ctxError("unlock", what, ctx.Err())
	case <-e.closed:
		return nil, ErrClosed
	}
}

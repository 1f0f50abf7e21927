package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Lease is one acquisition of a lock. It is valid until Done is closed;
// Context returns a context cancelled at that same moment, so work started
// under the lock can be tied to it:
//
//	lease, err := locker.Lock(ctx, "order:42")
//	if err != nil { ... }
//	defer lease.Unlock(context.Background())
//	err = process(lease.Context(), order, lease.Token())
//
// A Lease is safe for concurrent use.
type Lease struct {
	c     *Client
	key   string
	id    string
	token uint64
	ttl   time.Duration
	owner driver.Owner

	watch watchState // owned by the client's watchdog

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	err        error // why the lease ended; nil while held
	unlockErr  error // cached answer of a completed Unlock
	unlockDone bool
}

// Key returns the lock's name.
func (l *Lease) Key() string { return l.key }

// Token returns the fencing token of this acquisition. Tokens strictly
// increase across every acquisition of the same key, whoever acquires it,
// including after expiry or a forced release; pass it to the protected
// resource and have it reject tokens lower than the highest it has seen.
func (l *Lease) Token() uint64 { return l.token }

// TTL returns the lock's time-to-live in the store.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Owner returns the owner metadata stored with the lock.
func (l *Lease) Owner() driver.Owner { return l.owner }

// Done returns a channel closed when the lease ends: released, lost, or its
// client closed.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Context returns a context cancelled when the lease ends; its cause
// (context.Cause) is the same error as Err. It carries the values of the
// context passed to Lock, but not its cancellation.
func (l *Lease) Context() context.Context { return l.ctx }

// Err returns nil while the lease is held, ErrLockLost once the lock was
// lost, ErrReleased after Unlock, and ErrClosed when its client was closed.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// end records why the lease ended; the first reason wins.
func (l *Lease) end(reason error) bool {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return false
	}
	l.err = reason
	l.mu.Unlock()
	l.cancel(reason)
	return true
}

// Unlock releases the lock if it is still ours, and ends the lease either
// way: the watchdog stops at once. It returns nil when the lock was released
// (also when an earlier attempt had released it but its reply was lost),
// ErrNotHeld when the lock had already been lost — the other holder's lock is
// left intact — and a backend error when the store could not be reached, in
// which case calling Unlock again retries. Once Unlock has returned nil or
// ErrNotHeld, further calls return the same answer without a round trip.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.unlockDone {
		err := l.unlockErr
		l.mu.Unlock()
		return err
	}
	// A lease that was already lost answers ErrNotHeld even if the store
	// still had the key (lost at the deadline, just before expiry): the
	// holder stopped holding it then. The release below still cleans up.
	wasLost := errors.Is(l.err, ErrLockLost)
	l.mu.Unlock()

	l.c.watchdog.remove(l)
	l.end(ErrReleased)

	res, err := l.c.drv.Release(ctx, driver.ReleaseRequest{Key: l.key, ID: l.id})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return wrapBackend("unlock", l.key, err)
	}
	var answer error
	if res == driver.NotHeld || wasLost {
		answer = ErrNotHeld
	}
	l.mu.Lock()
	l.unlockDone, l.unlockErr = true, answer
	l.mu.Unlock()
	return answer
}

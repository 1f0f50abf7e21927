package dlock

import (
	"context"
	"time"

	"github.com/dlockio/dlock/internal/engine"
)

// acquisition is what the engine holds for a lease: a Hold (one lock) or a
// Group (the locks of LockAll, held as one).
type acquisition interface {
	*engine.Hold | *engine.Group
	TTL() time.Duration
	Deadline() time.Time
	Done() <-chan struct{}
	Err() error
	Context() context.Context
}

// lease is what Lease and MultiLease have in common: the engine's
// acquisition, its Client and owner, the mark its Context carries for
// re-entry, and the state of a nested hold. Written once, generic over the
// acquisition so that it stays without indirection or allocation.
type lease[A acquisition] struct {
	a     A
	c     *Client
	owner Owner
	m     mark
	nest  *nested // set on a nested hold (a Lease under a live lease's Context)
}

// TTL returns the lock's time-to-live in the store.
func (l *lease[A]) TTL() time.Duration { return l.a.TTL() }

// Owner returns the owner metadata stored with the lock.
func (l *lease[A]) Owner() Owner { return l.owner }

// Deadline returns the lease's current validity deadline: the lease ends
// then unless a renewal moves it (for a MultiLease, the earliest of its
// locks'). It is computed from when the acquire or renew request was sent,
// minus a drift margin, so the store cannot have expired the lock earlier.
func (l *lease[A]) Deadline() time.Time { return l.a.Deadline() }

// Done returns a channel closed when the lease ends.
func (l *lease[A]) Done() <-chan struct{} {
	if l.nest != nil {
		return l.nest.ctx.Done()
	}
	return l.a.Done()
}

// Context returns a context that ends with the lease; its cause
// (context.Cause) is the same error as Err. It carries the values of the
// context passed to Lock (or LockAll), but not its cancellation.
//
// A Lock of the same key on the same Client under it is a nested hold. A
// nested Lease's Context is a child of the outer lease's Context.
func (l *lease[A]) Context() context.Context {
	if l.nest != nil {
		return nestedContext{l.nest}
	}
	return leaseContext[A]{l}
}

// Err returns nil while the lease is held, an error matching ErrLockLost
// once the lock was lost, whose text says why (the store said it is not
// ours: forced release, expiry there, lost data; or the validity deadline
// passed before a renewal was confirmed: the store was out of reach),
// ErrReleased after Unlock, and ErrClosed when its client was closed. A
// MultiLease reports the end of the first of its locks that ended. A
// nested Lease reports the outer lease's end, or ErrReleased after its own
// Unlock.
func (l *lease[A]) Err() error {
	if l.nest != nil {
		return l.nest.err()
	}
	return l.a.Err()
}

// Holds returns how many holds are open on this acquisition: 1 for the
// lease itself plus its nested holds not yet unlocked; 0 once it ended. A
// nested Lease reports its outer lease's count.
func (l *lease[A]) Holds() int {
	if l.nest != nil {
		return l.nest.outer.holds()
	}
	return l.m.holds()
}

// Unlock releases the lock (every lock of a MultiLease, in one round trip
// per store node) if it is still ours, and ends the lease either way:
// renewal stops at once. It returns nil when the lock was released (also
// when an earlier attempt released it but its reply was lost, and later
// holders have released the lock since: the store keeps a record of each
// release for the TTL the lock had left), ErrNotHeld when the lock had
// already been lost — the other holder's lock is left intact; a MultiLease
// names the lost keys and releases the others all the same — and a
// backend error when the store could not be reached, in which case
// calling Unlock again retries; meanwhile the release is tried again in
// the background until the store takes it or the lease's TTL ends, so the
// lock does not stay held by nobody longer than the store refuses it. When
// ctx is already done (a request context in a defer, say) or ends during
// the call, the error matches ctx.Err() and the release is made in the
// background the same way, so the lock does not stay held for its TTL. Once Unlock has returned nil
// or ErrNotHeld, further calls return the same answer without a round
// trip.
//
// A nil ctx is an error (matching ErrInvalidArgument) unless an earlier
// call already gave the answer; the lease still ends and its release is
// made in the background, so the bad call leaks nothing.
//
// Unlocking the outer lease releases the lock and ends its nested holds.
// Unlocking a nested Lease only ends that hold, never the lock; it
// returns nil (also when the outer lease was released first), ErrNotHeld
// if the outer lease was lost before, ErrClosed after Client.Close, and
// the same answer again on every later call.
func (l *lease[A]) Unlock(ctx context.Context) error {
	if l.nest != nil {
		return l.nest.unlock(ctx)
	}
	if g, ok := any(l.a).(*engine.Group); ok {
		return l.c.e.ReleaseGroup(ctx, g)
	}
	h, _ := any(l.a).(*engine.Hold) // the only other acquisition
	return l.c.e.Release(ctx, h)
}

// Lease is one acquisition of a lock. It is valid until it ends: released,
// lost, or its Client closed. Err reports the end; Context returns a
// context that ends with it, so work started under the lock can be tied to
// it:
//
//	lease, err := locker.Lock(ctx, "order:42")
//	if err != nil { ... }
//	defer lease.Unlock(context.Background())
//	err = process(lease.Context(), order, lease.Token())
//
// Err and Context().Err() compare the clock with the validity deadline on
// every call, so they never report a lease held past its deadline, however
// late goroutines are scheduled. Done is closed at that moment by the
// Client's renewal goroutine, or as soon as Err notices; check Err (or
// Context().Err()) right before acting on the protected resource, and pass
// Token to it.
//
// A Lock or TryLock whose ctx descends from a live Lease's Context, on the
// same Client and key, returns a nested Lease (see reentrant.go and
// docs/reentrancy.md): same key and token, no round trip, ended with the
// outer lease; unlocking it leaves the lock held.
//
// A Lease is safe for concurrent use.
type Lease struct {
	lease[*engine.Hold]
}

// Key returns the lock's name.
func (l *Lease) Key() string { return l.a.Key() }

// Token returns the fencing token of this acquisition. Tokens strictly
// increase across every acquisition of the same key, whoever acquires it,
// including after expiry, a forced release, or a store restart (see the
// driver for what it assumes); pass it to the protected resource and have
// it reject tokens lower than the highest it has seen.
//
// That holds for the lock and for the write lease of a RWMutex. A read
// lease's token is the write epoch it reads (see RWMutex), and a permit's
// token has no meaning (see Semaphore).
func (l *Lease) Token() uint64 { return l.a.Token() }

// ID returns the acquisition's random owner id (128 bits, hex): what the
// store records the lease under, and what operators see as the holder's
// id (HolderInfo.ID, dlock status). It tells permits of a semaphore
// apart, whose tokens may repeat.
func (l *Lease) ID() string { return l.a.ID() }

// Nested reports whether the Lease is a nested hold of another lease.
func (l *Lease) Nested() bool { return l.nest != nil }

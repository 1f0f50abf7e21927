package dlock

import (
	"context"
	"fmt"
	"github.com/dlockio/dlock/driver"
)

// Semaphore is a handle on the counting semaphore name: at most N permits
// are held at once, each by its own lease. Get one with Client.Semaphore;
// handles made for the same name, in any process, are the same semaphore.
//
// A permit is a *Lease with everything a lease of Client.Lock has: its own
// TTL renewed by the Client's watchdog, Done, Context and Err that end
// before the store can expire it, and an idempotent Unlock that only its
// holder can make (the permit is recorded under the lease's random owner
// id). A holder that dies gives its permit back within one TTL; nothing
// has to count it back by hand. Waiters are admitted in arrival order.
//
// The store keeps N with the name: while permits of the name are held or
// waited for, an Acquire or TryAcquire with another N fails at once with
// an error matching ErrLimitMismatch (and ErrInvalidArgument), so that no
// caller admits more holders than the others allow. Once the name has
// neither holders nor waiters, the next caller's N is the name's: to
// change N, let the permits of the old N go first.
//
// Permit ids and tokens: a permit is told apart by its Lease.ID, the
// random owner id the store records it under, which operators see too
// (Client.InspectQueue's HolderInfo.ID, dlock status). Its Token is not a
// fencing token and not an id: up to N holders are valid at once, so the
// order of their tokens says nothing about which of them may write, and
// permits granted together may share one. Protect a resource that needs
// fencing with a lock.
type Semaphore struct {
	c    *Client
	name string
	n    int
}

// MaxPermits bounds a semaphore's N: a larger N is most likely a bug (a
// count used as a limit), and every acquisition's cost grows with the
// permits held.
const MaxPermits = 1 << 16

// Semaphore returns a handle on the semaphore name with n permits. The
// name and n (1 to MaxPermits) are checked by each call that acquires, so
// a bad n is an error matching ErrInvalidArgument there.
func (c *Client) Semaphore(name string, n int) *Semaphore {
	return &Semaphore{c: c, name: name, n: n}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// N returns the number of permits this handle asks with.
func (s *Semaphore) N() int { return s.n }

// Acquire takes a permit, waiting as long as ctx allows: until fewer than
// N permits are held and every caller queued before it has been served or
// has given up. It fails with ErrLimitMismatch if the name's permits were
// taken with another N, and with ErrQueueFull if the queue is at the cap
// of WithMaxWaiters. The store grants it in the same step as the release that
// frees a permit, and tells this Client; no polling. Under the context of
// a permit of this semaphore it takes a second permit; under a lease of
// the lock or read-write lock of the same name it returns ErrReentry, as
// it would wait for that lease.
func (s *Semaphore) Acquire(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.c.acquireQueued(ctx, queued{name: s.name, mode: driver.ModePermit, limit: s.n, wait: true}, opts)
}

// TryAcquire makes one attempt at a permit. It returns ErrNotAcquired when
// N permits are held or others are queued, and ErrLimitMismatch as
// Acquire does.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.c.acquireQueued(ctx, queued{name: s.name, mode: driver.ModePermit, limit: s.n}, opts)
}

func (s *Semaphore) check() error {
	if s.n < 1 || s.n > MaxPermits {
		return fmt.Errorf("%w: semaphore %q: %d permits, want 1 to %d", ErrInvalidArgument, s.name, s.n, MaxPermits)
	}
	return nil
}

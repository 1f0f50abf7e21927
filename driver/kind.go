package driver

import (
	"fmt"
	"strconv"
)

// Kind says which primitive a lease belongs to, so that one batched Renew
// or Release call can carry the leases of every primitive a Client holds.
// The zero value is the exclusive lock, the core primitive every driver
// implements; the other kinds exist only on drivers that implement the
// optional interface of their primitive, and the engine only ever sends a
// driver the kinds of leases that driver granted.
type Kind uint8

const (
	// KindLock is an exclusive lock taken with Driver.Acquire.
	KindLock Kind = iota
	// KindWaiter is a waiter's place in a fair lock's queue.
	KindWaiter
	// KindRead is one reader's share of a read-write lock.
	KindRead
	// KindPermit is one permit of a semaphore.
	KindPermit
)

// String returns the kind's name, as logs and errors show it.
func (k Kind) String() string {
	switch k {
	case KindLock:
		return "lock"
	case KindWaiter:
		return "waiter"
	case KindRead:
		return "read"
	case KindPermit:
		return "permit"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Check returns an error matching ErrInvalid if k is none of the kinds
// above. Drivers call it on every Renew and Release request, so that a
// request the engine could not have sent fails loudly instead of being
// taken for some other primitive's lease. A driver that implements only
// some of the kinds rejects the others itself.
func (k Kind) Check() error {
	if k > KindPermit {
		return fmt.Errorf("%w: no %v leases", ErrInvalid, k)
	}
	return nil
}

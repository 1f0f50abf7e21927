package dlock

import (
	"context"

	"github.com/dlockio/dlock/driver"
)

// RWMutex is a handle on the read-write lock name: any number of readers
// share it, a writer excludes readers and other writers. Get one with
// Client.RWMutex; it holds no state of its own beyond the name, so handles
// made for the same name, in any process, are the same lock.
//
// Every RLock and Lock returns its own *Lease, with everything a lease of
// Client.Lock has: its own TTL renewed by the Client's watchdog, Done,
// Context and Err that end before the store can expire it, and an
// idempotent Unlock. A reader that dies frees its share within one TTL
// without touching the other readers.
//
// Readers and writers are admitted in arrival order: a reader that arrives
// while a writer waits queues behind that writer, so a steady stream of
// readers cannot starve writers, and a writer waits only for the readers
// that arrived before it.
//
// Tokens: a write lease's Token is a fencing token like Client.Lock's,
// strictly greater than every token issued for name before. A read lease's
// Token names the write epoch it reads: it is at least the token of every
// write lease granted on name before the reader, and below the token of
// every write lease granted after it. A resource that accepts a read only
// if its token is at least the highest write token it has seen, and a
// write only if its token is also above every read token it has seen,
// rejects a reader that was paused past a newer write and a writer that
// was paused past its lease once a later reader has been there. See
// docs/rwlock.md.
//
// Asking for the lock again through a context derived from one of its own
// leases never waits for that lease: the write lock under a read lease is
// refused with ErrUpgrade (see Lock), a read or write lease under the
// write lease and a read lease under a read lease nest in it (re-entry:
// no round trip, the same token, ended with the outer lease; see
// WithoutReentry). The check follows contexts, not goroutines: a lease
// held by one goroutine and a Lock called by another with an unrelated
// context are two independent holders, as they would be in two processes.
type RWMutex struct {
	c    *Client
	name string
}

// RWMutex returns a handle on the read-write lock name. The name is
// checked (like Lock's key) by each call that acquires.
//
// The write side is the exclusive lock of Client.Lock: Client.Lock(ctx,
// name) and RWMutex(name).Lock exclude each other and readers alike, and
// draw their tokens from one sequence. RWMutex.Lock waits in the queue in
// arrival order; Client.Lock and TryLock never take the lock while anyone
// is queued for it or reads it.
func (c *Client) RWMutex(name string) *RWMutex { return &RWMutex{c: c, name: name} }

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.name }

// RLock takes a read lease, waiting as long as ctx allows: until no writer
// holds the lock and none is queued ahead of this reader. The store grants
// it in the same step as the release that lets it in, and tells this
// Client; no polling. Under a context derived from a read or write lease
// of this lock it is a nested hold of that lease (see RWMutex).
func (m *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.acquireQueued(ctx, queued{name: m.name, mode: driver.ModeShared, wait: true}, opts)
}

// TryRLock makes one attempt at a read lease. It returns ErrNotAcquired
// when a writer holds the lock or is queued.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.acquireQueued(ctx, queued{name: m.name, mode: driver.ModeShared}, opts)
}

// Lock takes the write lease, waiting as long as ctx allows: until the
// readers and the writer that arrived earlier are gone.
//
// When ctx is derived from a read lease of this lock that is still held
// by this RWMutex's Client (its Context, or a context made from it), Lock
// returns ErrUpgrade at once: the writer would wait for that reader
// forever. (On another Client it waits like any other process.) Release the read
// lease and call Lock, and re-read what the read lease protected: another
// writer may come first. Client.Lock and TryLock of name are refused the
// same way. Under the write lease (or Client.Lock's lease of name), Lock
// is a nested hold of it. A permit of a semaphore of this name under any
// of these leases, and any of them under a permit, would wait for the
// other and are refused with ErrReentry.
func (m *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.acquireQueued(ctx, queued{name: m.name, mode: driver.ModeExclusive, wait: true}, opts)
}

// TryLock makes one attempt at the write lease. It returns ErrNotAcquired
// when a reader or writer holds the lock or is queued, and ErrUpgrade as
// Lock does.
func (m *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.c.acquireQueued(ctx, queued{name: m.name, mode: driver.ModeExclusive}, opts)
}

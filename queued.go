package dlock

import (
	"context"
	"sync/atomic"

	"github.com/dlockio/dlock/driver"
)

// The read-write lock and the semaphore are one mechanism in the store: a
// queue per name, holders each with its own lease, in a mode. This file
// turns their calls into queued acquisitions through the engine.

// mode is what a queued acquisition asks for.
type mode uint8

const (
	modeExclusive mode = iota + 1 // a write lease of a read-write lock
	modeShared                    // a read lease
	modePermit                    // one of limit permits
)

func (m mode) String() string {
	switch m {
	case modeExclusive:
		return "write lock"
	case modeShared:
		return "read lock"
	case modePermit:
		return "permit"
	}
	return "mode?"
}

// queued is one queued acquisition call.
type queued struct {
	name  string
	mode  mode
	limit int  // permits, for modePermit
	wait  bool // wait for a turn; else one attempt
}

// leaseMark is stored in the context of every lease of a read-write lock,
// so that a request made under it can be recognised as nested and refused
// (see RWMutex.Lock). It points at the lease once granted; a mark whose
// lease is gone — or not yet granted — refuses nothing.
type leaseMark struct {
	lease atomic.Pointer[Lease]
}

// markKey identifies a read-write lock's mark: per Client and name, since
// a lease of another store's lock of the same name is no conflict.
type markKey struct {
	c    *Client
	name string
}

// nested reports whether ctx derives from a lease of the read-write lock
// name that is still held.
func (c *Client) nested(ctx context.Context, name string) (*Lease, bool) {
	m, ok := ctx.Value(markKey{c, name}).(*leaseMark)
	if !ok {
		return nil, false
	}
	l := m.lease.Load()
	return l, l != nil && l.Err() == nil
}

// acquireQueued validates q and its options (prepare refuses a request
// nested under a lease of the name's read-write lock, whatever it asks
// for: a permit or plain lock of that name would wait for it too), and
// makes the acquisition; leases of a read-write lock are marked.
func (c *Client) acquireQueued(ctx context.Context, q queued, opts []LockOption) (*Lease, error) {
	req, lc, err := c.prepare(ctx, q.name, opts)
	if err != nil {
		return nil, err
	}
	var mark *leaseMark
	if q.mode != modePermit {
		mark = &leaseMark{}
		ctx = context.WithValue(ctx, markKey{c, q.name}, mark)
	}
	l, err := c.sendQueued(ctx, q, req, lc)
	if err != nil {
		return nil, err
	}
	if mark != nil {
		mark.lease.Store(l)
	}
	return l, nil
}

// kindName names what a lease is, for errors.
func (l *Lease) kindName() string {
	switch l.h.Kind() {
	case driver.KindRead:
		return "read lease"
	case driver.KindPermit:
		return "permit"
	}
	return "write lease"
}

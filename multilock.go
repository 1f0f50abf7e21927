package dlock

import (
	"context"
	"fmt"
	"slices"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// TryLockAll makes one attempt to acquire every lock of keys, all or
// none. It returns ErrNotAcquired (naming a busy key) when one is held by
// another owner; then none is held. See LockAll.
func (c *Client) TryLockAll(ctx context.Context, keys []string, opts ...LockOption) (*MultiLease, error) {
	reqs, lc, head, err := c.prepareAll(ctx, keys, opts)
	if err != nil {
		return nil, err
	}
	g, err := c.e.AcquireAll(ctx, reqs, false, lc.watchdog)
	if err != nil {
		return nil, err
	}
	return c.newMultiLease(g, reqs, head, lc), nil
}

// LockAll acquires every lock of keys, all or none, waiting as long as ctx
// allows: one deadline for the whole acquisition, not one per key. The
// options apply to every lock (one TTL, one owner meta).
//
// When the store can take the keys in one atomic step — the Redis driver
// on one server, or in a Cluster when the keys share a hash tag at their
// start ("{order:42}:items", "{order:42}:payment") — each attempt is one
// round trip that takes all of them or none, and a busy attempt waits for
// a release of any of the keys, holding nothing. Otherwise the locks are
// taken one by one in sorted order, so callers naming the same keys in
// any order never deadlock; locks taken before a failure (a backend
// error, ctx ending) are released before LockAll returns — or, when ctx
// has ended, right after it, in the background.
//
// Keys must be distinct and at most the driver's batch size (Redis:
// 1,000); an empty list is an invalid argument. LockAll does not nest: if
// ctx descends from a live lease of this Client on one of the keys it
// returns ErrReentry instead of waiting for its own lock. Errors are
// Lock's.
func (c *Client) LockAll(ctx context.Context, keys []string, opts ...LockOption) (*MultiLease, error) {
	reqs, lc, head, err := c.prepareAll(ctx, keys, opts)
	if err != nil {
		return nil, err
	}
	g, err := c.e.AcquireAll(ctx, reqs, true, lc.watchdog)
	if err != nil {
		return nil, err
	}
	return c.newMultiLease(g, reqs, head, lc), nil
}

// prepareAll checks a multi-key request and returns it sorted by key.
func (c *Client) prepareAll(ctx context.Context, keys []string, opts []LockOption) ([]driver.AcquireRequest, lockConfig, *mark, error) {
	switch {
	case len(keys) == 0:
		return nil, lockConfig{}, nil, fmt.Errorf("%w: lock all: no keys", ErrInvalidArgument)
	case len(keys) > c.caps.MaxBatch:
		return nil, lockConfig{}, nil, fmt.Errorf("%w: lock all: %d keys, more than %d", ErrInvalidArgument, len(keys), c.caps.MaxBatch)
	}
	// The canonical order: every caller takes the keys in it, so no two
	// wait for each other in a cycle.
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	req, lc, err := c.prepare(ctx, sorted[0], opts)
	if err != nil {
		return nil, lc, nil, err
	}
	reqs := make([]driver.AcquireRequest, len(sorted))
	head := marks(ctx)
	for i, k := range sorted {
		if i > 0 && k == sorted[i-1] {
			return nil, lc, nil, fmt.Errorf("%w: lock all: key %q named twice", ErrInvalidArgument, k)
		}
		if err := c.CheckKey(k); err != nil {
			return nil, lc, nil, err
		}
		if m, _ := c.enclosing(head, k); m != nil {
			return nil, lc, nil, fmt.Errorf("%w: %q (lock all does not nest)", ErrReentry, k)
		}
		reqs[i] = req
		reqs[i].Key = k
	}
	return reqs, lc, head, nil
}

func (c *Client) newMultiLease(g *engine.Group, reqs []driver.AcquireRequest, head *mark, lc lockConfig) *MultiLease {
	m := &MultiLease{lease: lease[*engine.Group]{a: g, c: c, owner: reqs[0].Owner}, keys: keysOf(reqs)}
	m.m = mark{c: c, parent: head, multi: m, noReentry: lc.noReentry}
	return m
}

func keysOf(reqs []driver.AcquireRequest) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	return keys
}

// MultiLease is one acquisition of several locks, taken together by
// LockAll or TryLockAll and held as one: it ends when any of its locks is
// lost (the others are then released in the background), when it is
// unlocked, or when its Client is closed. Done, Context, Err and Unlock
// are a Lease's; each lock has its own fencing token.
//
// A Lock or TryLock of one of its keys under its Context is a nested hold
// of that key, as under a Lease.
//
// A MultiLease is safe for concurrent use.
type MultiLease struct {
	lease[*engine.Group]
	keys []string // sorted, as the holds
}

// Keys returns the lock names, sorted.
func (m *MultiLease) Keys() []string { return slices.Clone(m.keys) }

// Token returns the fencing token of key's lock, or 0 if key is not one
// of the lease's keys. Pass it to the resource key protects.
func (m *MultiLease) Token(key string) uint64 {
	if h := m.holdFor(key); h != nil {
		return h.Token()
	}
	return 0
}

// Tokens returns the fencing token of every lock, by key.
func (m *MultiLease) Tokens() map[string]uint64 {
	t := make(map[string]uint64, len(m.keys))
	for _, h := range m.a.Holds() {
		t[h.Key()] = h.Token()
	}
	return t
}

func (m *MultiLease) holdFor(key string) *engine.Hold {
	if i, ok := slices.BinarySearch(m.keys, key); ok {
		return m.a.Holds()[i]
	}
	return nil
}

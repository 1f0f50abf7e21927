// Package driver defines what a dlock backend must implement.
//
// The root package dlock holds everything that is the same for every
// backend: lease handles, the watchdog that renews leases, the validity
// deadline, waiting, and error classification. A driver only moves requests
// to and from its store, atomically. The split follows database/sql and
// database/sql/driver: applications import dlock and one driver package;
// they never call a driver directly.
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrInvalid is returned by drivers for arguments they cannot accept (a nil
// client, a malformed option). dlock wraps it so that
// errors.Is(err, dlock.ErrInvalidArgument) holds.
var ErrInvalid = errors.New("invalid argument")

// Owner describes who holds a lock, for operators reading the store.
type Owner struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	Meta string `json:"meta,omitempty"`
}

// AcquireRequest asks for one attempt at taking Key.
type AcquireRequest struct {
	Key   string        // lock name as the user gave it (already validated)
	ID    string        // random per-acquisition owner id (128 bits, hex)
	TTL   time.Duration // time-to-live of the lock in the store
	Owner Owner
	// Waiting is set when the caller waits if the lock is busy, and so
	// needs AcquireResult.RetryAfter; otherwise a driver may leave it zero.
	Waiting bool
}

// AcquireResult is the outcome of one attempt.
type AcquireResult struct {
	// Acquired reports whether the lock is now held by the request's ID.
	Acquired bool
	// Token is the fencing token of this acquisition: strictly greater than
	// every token the store issued for this key before. Set when Acquired.
	Token uint64
	// RetryAfter is, when not Acquired, the time the current holder's lock has
	// left in the store (zero if unknown). Waiters sleep at most this long
	// before trying again, so a lost release notification costs at most one TTL.
	RetryAfter time.Duration
}

// ReleaseRequest asks to release Key if it is still held by ID.
type ReleaseRequest struct {
	Key string
	ID  string
}

// ReleaseResult is the outcome of a release.
type ReleaseResult int

const (
	// Released means the lock was held by the request's ID and is now free.
	Released ReleaseResult = iota + 1
	// AlreadyReleased means an earlier release of the same acquisition
	// succeeded (a retry after a lost reply).
	AlreadyReleased
	// NotHeld means the lock was not held by the request's ID: it expired,
	// was force-released, or belongs to someone else now. Nothing was changed.
	NotHeld
)

// RenewRequest asks to extend Key to TTL if it is still held by ID.
type RenewRequest struct {
	Key string
	ID  string
	TTL time.Duration
}

// Driver is a lock store. Every method must be safe for concurrent use and
// must honour ctx. Errors returned for store failures (unreachable, timeouts,
// script errors) are wrapped by dlock as backend errors.
type Driver interface {
	// Acquire makes one atomic attempt to take the lock and, on success,
	// issue the next fencing token.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireResult, error)
	// Release atomically frees the lock if it is still held by req.ID and
	// notifies waiters watching the key.
	Release(ctx context.Context, req ReleaseRequest) (ReleaseResult, error)
	// Renew extends many leases at once. held[i] reports whether reqs[i] was
	// still owned (and is now extended). Drivers batch and pipeline so that
	// one call costs few round trips however many leases it carries.
	Renew(ctx context.Context, reqs []RenewRequest) (held []bool, err error)
	// Watch opens the client's single release-notification stream. onRelease
	// is called (from one goroutine, quickly) with the key of every released
	// lock the Watcher was asked to follow.
	Watch(onRelease func(key string)) (Watcher, error)
	// Close releases driver resources; it does not close a client the
	// application passed in.
	Close() error
}

// Watcher follows release notifications for a changing set of keys.
type Watcher interface {
	// Add starts following key and returns once notifications for it are
	// guaranteed to be delivered (the subscription is confirmed).
	Add(ctx context.Context, key string) error
	// Remove stops following key.
	Remove(ctx context.Context, key string) error
	// Close stops the stream and its goroutines.
	Close() error
}

// LockInfo is what an operator sees about a held lock.
type LockInfo struct {
	Key string `json:"key"`
	// Token is the latest fencing token issued for Key: the holder's, or
	// higher if the store counts attempts made since (the Redis driver does).
	// Fencing off tokens up to it always fences off the holder.
	Token uint64        `json:"token"`
	Owner Owner         `json:"owner"`
	Since time.Time     `json:"since"`  // acquisition time, by the holder's clock
	TTL   time.Duration `json:"ttl_ns"` // time left in the store
}

// Inspector is implemented by drivers that let operators look at and break
// locks (used by the dlock CLI).
type Inspector interface {
	// Inspect returns the lock's holder, or ok=false when the lock is free.
	Inspect(ctx context.Context, key string) (info LockInfo, ok bool, err error)
	// List returns every held lock whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]LockInfo, error)
	// ForceRelease frees the lock whoever holds it and wakes waiters. It
	// returns the latest token issued (as LockInfo.Token), or ok=false if the
	// lock was free.
	ForceRelease(ctx context.Context, key string) (token uint64, ok bool, err error)
}

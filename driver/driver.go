// Package driver defines what a dlock backend implements.
//
// The root package dlock holds what users touch; its internal engine holds
// what is the same for every backend: lease bookkeeping, validity deadlines,
// batched renewal and release, waiting. A driver only moves requests to and
// from its store, atomically, and describes the store's limits in
// Capabilities. The split follows database/sql and database/sql/driver:
// applications import dlock and one driver package and never call a driver
// directly.
//
// What a driver can do is stated in one place each: the store's limits in
// Capabilities, and each feature by the interface that carries it. Driver
// is the core every backend implements: the plain lock, renewal, release
// and, through Watch, release notifications. The other interfaces are
// optional, because a backend may truly lack what they need (a store
// without atomic multi-key writes, a quorum of independent servers with
// no shared queue); dlock asks for each once, when a Client is made:
//
//   - Queuer: the store's FIFO queue, behind the fair lock, RWMutex and
//     Semaphore (without it they fail with an error matching
//     errors.ErrUnsupported); QueueBatcher sends several Enqueues in one
//     round trip.
//   - MultiAcquirer: LockAll's atomic step over several keys (without it,
//     LockAll takes them one by one in sorted order).
//   - Inspector and QueueLister: the operators' view (Client.Inspect,
//     List, ForceRelease, InspectQueue, ListQueues; dlock status), else
//     errors.ErrUnsupported.
//   - KeyChecker: key rules of the store beyond dlock's own.
//
// The Redis, etcd and in-memory drivers implement Queuer, MultiAcquirer,
// Inspector and QueueLister; the ZooKeeper driver all but MultiAcquirer
// (a ZooKeeper multi cannot check that a name has no waiters); the Redis
// quorum of independent masters only Inspector. Only the Redis drivers
// implement KeyChecker, and only the single-server one QueueBatcher. The
// conformance suite in package drivertest checks every driver against the
// same promises, for the interfaces it implements.
package driver

import (
	"context"
	"errors"
	"time"
)

// ErrInvalid is returned by drivers for arguments they cannot accept (a nil
// client, a malformed option, an unusable key). It is the same value as
// dlock.ErrInvalidArgument, so errors.Is holds for either name.
var ErrInvalid = errors.New("dlock: invalid argument")

// Owner describes who holds a lock, for operators reading the store.
type Owner struct {
	Host string `json:"host"`
	PID  int    `json:"pid"`
	Meta string `json:"meta,omitempty"`
}

// Capabilities are the store's facts that the engine must respect. The root
// package holds none of them itself.
type Capabilities struct {
	// TTLUnit is the store's TTL granularity: every TTL is rounded up to a
	// multiple of it, so the TTL the store applies is exactly the one the
	// validity deadline assumes (Redis: 1 ms).
	TTLUnit time.Duration
	// MinTTL is the shortest TTL the store handles safely.
	MinTTL time.Duration
	// ExpiryMargin is how much earlier than TTL after the request reached it
	// the store may consider a key expired, granularity included (Redis
	// counts whole milliseconds: 1 ms). The validity deadline subtracts it.
	ExpiryMargin time.Duration
	// MaxBatch is the most requests one Renew or Release call should carry.
	MaxBatch int
	// ContextAware reports that every call returns promptly once its ctx is
	// done, deadline or cancellation. When false the engine runs calls it may
	// have to abandon on a goroutine of its own, and cleans up after a call
	// that completes after it was abandoned.
	ContextAware bool
	// QueueByDefault makes a Client's Lock wait in the driver's queue (the
	// fair lock, see Queuer) unless the caller asks for the plain lock: a
	// driver sets it when an uncontended acquisition through its queue costs
	// what a plain one does. Ignored on a driver that is not a Queuer.
	QueueByDefault bool
}

// AcquireRequest asks for one attempt at taking Key.
type AcquireRequest struct {
	Key   string        // lock name as the user gave it (already validated)
	ID    string        // random per-acquisition owner id (128 bits, hex)
	TTL   time.Duration // time-to-live of the lock in the store, a multiple of TTLUnit
	Owner Owner
	// Waiting is set when the caller waits if the lock is busy, and so
	// needs AcquireResult.RetryAfter; otherwise a driver may leave it zero.
	Waiting bool
}

// AcquireResult is the outcome of one attempt.
type AcquireResult struct {
	// Acquired reports whether the lock is now held by the request's ID. A
	// repeated request with the same ID (a retry after a lost reply) must
	// report Acquired again, with the same Token, while the lock is held.
	Acquired bool
	// Token is the fencing token of this acquisition: strictly greater than
	// every token the store issued for this key before. Set when Acquired.
	Token uint64
	// RetryAfter is, when not Acquired, how long the current holder's lock
	// has left in the store: 0 means it is about to expire or just did (try
	// again at once); negative means unknown. Waiters sleep at most this long
	// before trying again, so a lost release notification costs at most one
	// TTL.
	RetryAfter time.Duration
}

// ReleaseRequest asks to release Key if it is still held by ID.
type ReleaseRequest struct {
	Kind Kind // which primitive's lease; zero for the exclusive lock
	Key  string
	ID   string
	// Settled, when set, is the ID of an earlier lease of Key whose release
	// the caller has had the answer to: no retry of that release can come
	// any more, so a driver that keeps proof of past releases for their
	// retries (AlreadyReleased) need not keep that one. A hint; a driver
	// may ignore it.
	Settled string
}

// ReleaseResult is the outcome of one release.
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
	Kind Kind // which primitive's lease; zero for the exclusive lock
	Key  string
	ID   string
	TTL  time.Duration
}

// Driver is a lock store. Every method must be safe for concurrent use.
// Errors returned for store failures (unreachable, timeouts, script errors)
// are wrapped by dlock as backend errors; errors matching ErrInvalid as
// invalid arguments.
type Driver interface {
	// Capabilities describes the store. It is called once, by dlock.New.
	Capabilities() Capabilities
	// Acquire makes one atomic attempt to take the lock and, on success,
	// issue the next fencing token.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireResult, error)
	// Release frees every lease of reqs still held by its ID, atomically per
	// lease, and notifies the Watchers following those keys: at least of
	// every key a waiting Acquire or AcquireAll (Waiting set) was refused
	// since its lock was taken. A driver may skip the notification of a
	// key nobody waited for (the Redis driver does). A request of a Kind
	// the driver does not implement is an error matching ErrInvalid. results[i] answers
	// reqs[i]. One call costs few round trips however many it carries.
	Release(ctx context.Context, reqs []ReleaseRequest) (results []ReleaseResult, err error)
	// Renew extends many leases at once. held[i] reports whether reqs[i] was
	// still owned (and is now extended). A request of a Kind the driver does
	// not implement is an error matching ErrInvalid.
	Renew(ctx context.Context, reqs []RenewRequest) (held []bool, err error)
	// Watch opens the client's single release-notification stream. onRelease
	// is called (from one goroutine; it never blocks) with the key of every
	// released lock the Watcher was asked to follow.
	Watch(onRelease func(key string)) (Watcher, error)
	// Close releases driver resources. A driver closes the store client only
	// if it created that client itself.
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

// KeyChecker is implemented by drivers whose store restricts lock names
// beyond dlock's own rules (non-empty, at most dlock.MaxKeyLen bytes). The
// error must match ErrInvalid.
type KeyChecker interface {
	CheckKey(key string) error
}

// LockInfo is what an operator sees about a held lock.
type LockInfo struct {
	Key string `json:"key"`
	// Token is the fencing token of the current holder.
	Token uint64        `json:"token"`
	Owner Owner         `json:"owner"`
	Since time.Time     `json:"since"`  // acquisition time, by the holder's clock (a grant from the queue: the store's or granter's)
	TTL   time.Duration `json:"ttl_ns"` // time left in the store
}

// Inspector is implemented by drivers that let operators look at and break
// locks (dlock's Client.Inspect, InspectQueue, List and ForceRelease; the
// dlock CLI). It is the operators' interface: nothing that takes or holds
// a lock uses it.
type Inspector interface {
	// InspectQueue returns the holders and waiters of a name of the
	// store's queue (see Queuer); ok is false when the name has neither,
	// and always on a driver without a queue.
	InspectQueue(ctx context.Context, key string) (info QueueInfo, ok bool, err error)
	// Inspect returns the lock's holder, or ok=false when the lock is free.
	Inspect(ctx context.Context, key string) (info LockInfo, ok bool, err error)
	// List returns every held lock whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]LockInfo, error)
	// ForceRelease frees the lock whoever holds it and wakes waiters. It
	// returns the broken holder's token, or ok=false if the lock was free.
	ForceRelease(ctx context.Context, key string) (token uint64, ok bool, err error)
}

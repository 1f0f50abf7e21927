package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Queuer is implemented by drivers that keep queued leases: the one
// mechanism behind the fair lock, the read-write lock and the semaphore.
//
// A name has holders, each a lease of its own (own ID, TTL, owner), and a
// FIFO queue of waiters, each a lease of its own too (KindWaiter, renewed
// with Renew like any lease: a waiter that stops renewing drops out within
// one TTL, a live one is never pruned however long it waits). A request
// has a Mode and is granted iff no live waiter is ahead of it and it is
// compatible with the holders:
//
//   - ModeExclusive (fair lock, writer): no holder at all. Its lease is a
//     KindLock lease on the same store entry, with the same fencing-token
//     sequence, as Driver.Acquire's, so plain and queued exclusive
//     acquisitions of one name exclude each other. Driver.Acquire refuses a
//     name that has waiters or shared/permit holders, so it never jumps the
//     queue.
//   - ModeShared (reader): no exclusive and no permit holder. KindRead.
//   - ModePermit: fewer than the request's Limit permit holders, and no
//     exclusive or shared holder. KindPermit.
//
// Every time and order decision is the store's: arrival order is the
// store's sequence, expiry its clock.
//
// Release or expiry of a holder, and the departure of a waiter, grant in
// the same atomic step to the queue heads that now fit (strictly in order:
// the first waiter that does not fit stops the grants behind it, so a
// waiting writer is not overtaken by later readers), and announce each
// grant on the waiter's Inbox (WatchGrants). Stores without expiry hooks
// (Redis) grant after an expiry at the next request that touches the name:
// a waiter's renewal, or the poke the engine sends at RetryAfter.
//
// A granted waiter's lease takes over the waiter's place: same ID, and a
// store TTL equal to what the waiter place had left, so that its expiry is
// no earlier than the one of the waiter's last renewal (see Grant).
//
// Renew with KindWaiter reports true while the ID still waits (its place
// is extended); false once it was granted or dropped: the waiter then
// sends Enqueue again with the same ID to learn which (a lost grant
// notification costs at most one renewal interval). Release with
// KindWaiter removes the place; if the ID was granted meanwhile, it
// releases that lease too (the grant raced a cancellation: the lease is
// passed on at once). Renew and Release with KindRead or KindPermit act on
// the holder of that ID; with KindLock on the exclusive holder, which also
// hands off to the queue.
type Queuer interface {
	// Enqueue makes one atomic attempt: grant req, or (req.Wait) queue it,
	// or refuse it. A request whose ID already holds a lease of the name
	// (a retry after a lost reply, or a waiter learning of its grant)
	// reports Granted with the same token and sets the lease's TTL to
	// req.TTL from now. A request whose ID already waits keeps its place
	// and has it extended to req.TTL, as a renewal does.
	Enqueue(ctx context.Context, req QueueRequest) (QueueResult, error)
	// WatchGrants subscribes to the grants announced on inbox and returns
	// once announcements are guaranteed to be delivered. onGrant is called
	// from one goroutine and never blocks. Announcements are best effort:
	// one may be lost (a reconnect), so waiters do not depend on them,
	// and one may be forged unless it is Confirmed (see Grant).
	WatchGrants(ctx context.Context, inbox string, onGrant func(Grant)) (GrantWatcher, error)
}

// QueueBatcher is implemented by Queuers that can send several Enqueue
// requests in one round trip, each as Enqueue would, in order. results[i]
// and errs[i] answer reqs[i]; both slices have len(reqs) elements.
type QueueBatcher interface {
	Queuer
	EnqueueBatch(ctx context.Context, reqs []QueueRequest) (results []QueueResult, errs []error)
}

// ErrQueueFull is Enqueue's error for a waiting request refused because
// its name already has QueueRequest.MaxWaiters waiters. It is not an
// invalid argument: the same request may be queued once fewer wait.
// dlock.ErrQueueFull is the same value.
var ErrQueueFull = errors.New("dlock: queue full")

// ErrLimitMismatch is Enqueue's error for a ModePermit request whose Limit
// is not the one of the name's permit holders and waiters (see
// QueueRequest.Limit). It matches ErrInvalid too: the caller's limit is
// wrong for the name. dlock.ErrLimitMismatch is the same value.
var ErrLimitMismatch = fmt.Errorf("%w: permit limit differs from the one the name's permits were taken with", ErrInvalid)

// Mode is what a queued request asks for.
type Mode uint8

const (
	// ModeExclusive excludes every other holder (fair lock, writer).
	ModeExclusive Mode = iota + 1
	// ModeShared is shared with other ModeShared holders (reader).
	ModeShared
	// ModePermit is one of Limit permits (semaphore).
	ModePermit
)

// HolderKind is the Kind of the lease a grant of mode m is.
func (m Mode) HolderKind() Kind {
	switch m {
	case ModeShared:
		return KindRead
	case ModePermit:
		return KindPermit
	}
	return KindLock
}

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeExclusive:
		return "exclusive"
	case ModeShared:
		return "shared"
	case ModePermit:
		return "permit"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// QueueRequest asks for a queued lease on Key.
type QueueRequest struct {
	Key   string        // name, as the user gave it (already validated)
	ID    string        // random per-acquisition owner id, as for Acquire
	TTL   time.Duration // of the lease and of the waiter place; a multiple of TTLUnit
	Owner Owner
	Mode  Mode
	// Limit is the number of permits for ModePermit (at least 1). Zero for
	// the other modes. The store keeps it with the name: while the name has
	// permit holders or permit waiters, a ModePermit request with another
	// Limit is refused with ErrLimitMismatch (even one that does not wait);
	// once it has neither, the next request's Limit becomes the name's.
	Limit int
	// MaxWaiters, when positive, caps the name's queue for this request: a
	// request that would join a queue of MaxWaiters waiters or more is
	// refused with ErrQueueFull, and not queued. Places that expired and
	// that the store has not dropped yet may count. A request whose ID
	// already waits is never refused for it. Zero: no cap.
	MaxWaiters int
	// Wait queues the request as a waiter when it cannot be granted now;
	// without it the request is refused (and never overtakes a waiter).
	Wait bool
	// Inbox is where a grant to this waiter is announced (WatchGrants).
	// Required with Wait.
	Inbox string
}

// QueueResult is the outcome of one Enqueue.
type QueueResult struct {
	// Granted reports that ID now holds a lease of req.Mode's HolderKind.
	Granted bool
	// Token of the grant. ModeExclusive: the next fencing token of the
	// name, from the sequence Driver.Acquire uses. ModeShared: the token of
	// the latest exclusive grant of the name issued before this one (the
	// write epoch the reader sees; see Grant). ModePermit: no meaningful
	// order across holders, and not necessarily unique (an epoch, like
	// ModeShared's, on some drivers): tell permits apart by their ID.
	Token uint64
	// Queued reports that ID now waits (a KindWaiter lease of TTL).
	Queued bool
	// RetryAfter, when not Granted, is how long until a store-side event
	// could grant the request without any notification (the earliest
	// expiry of a blocking holder); negative when unknown. A store without
	// expiry hooks reports it to every waiter, not only the head: a waiter
	// behind others becomes the head by grants and departures it does not
	// hear of, and the engine's poke at RetryAfter is what grants promptly
	// after a holder dies. Others may report it to the head only.
	RetryAfter time.Duration
}

// Grant announces that a waiter was granted its lease.
//
// The reader token of ModeShared is an exclusive epoch: every ModeShared
// token is at least every exclusive token issued for the name before its
// grant and less than every exclusive token issued after it. A resource
// that accepts a read iff its token is at least the highest exclusive
// token it has seen rejects reads that predate a newer write.
//
// Confirmed tells the engine whether the announcement itself is proof of
// the grant. A driver sets it only when no client that cannot grant could
// have produced it: an etcd watch event, written by the granting
// transaction, can only come from a client allowed to write the name's
// keys. Redis pub/sub cannot be: anyone allowed to PUBLISH on the inbox's
// channel (a tenant with read access to the keys learns the inbox and the
// waiter's id) can send any payload, token included. An announcement that
// is not Confirmed is only a wake-up: the waiter asks the store with
// Enqueue, whose reply carries the token.
type Grant struct {
	Key       string
	ID        string
	Token     uint64
	Confirmed bool
}

// GrantWatcher is a subscription made by WatchGrants.
type GrantWatcher interface {
	// Close ends the subscription and waits for a callback in progress.
	Close() error
}

// QueueInfo is what an operator sees of a queued name.
type QueueInfo struct {
	Key     string       `json:"key"`
	Holders []HolderInfo `json:"holders"`
	Waiters []WaiterInfo `json:"waiters"` // in queue order
}

// HolderInfo is one holder of a queued name.
type HolderInfo struct {
	ID    string        `json:"id"`
	Mode  Mode          `json:"mode"`
	Token uint64        `json:"token"`
	Owner Owner         `json:"owner"`
	TTL   time.Duration `json:"ttl_ns"` // time left in the store
}

// WaiterInfo is one waiter of a queued name.
type WaiterInfo struct {
	ID    string        `json:"id"`
	Mode  Mode          `json:"mode"`
	Limit int           `json:"limit,omitempty"`
	Owner Owner         `json:"owner"`
	TTL   time.Duration `json:"ttl_ns"` // time left in the store
}

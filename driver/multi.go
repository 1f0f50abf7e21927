package driver

import (
	"context"
	"time"
)

// MultiAcquirer is implemented by drivers that can take several exclusive
// locks in one atomic step, all or none. dlock's LockAll uses it when
// Atomic says the keys allow it, and otherwise takes the locks one by one
// with Acquire, in sorted order.
type MultiAcquirer interface {
	// Atomic reports whether AcquireAll can take all of keys in one atomic
	// step (Redis: always on one server; in a Cluster, only keys of one
	// slot). It is cheap and makes no call to the store.
	Atomic(keys []string) bool
	// AcquireAll makes one atomic attempt to take every lock of reqs, each
	// under its own ID, and issues each its own next fencing token, as
	// Acquire would. Either every lock is taken or the store is left as it
	// was. A repeated request with the same IDs (a retry after a lost
	// reply) must report Acquired with the same tokens while the locks are
	// held; if a lost reply's grant is only partly left (one of its locks
	// expired and another owner took it), the rest of it is released and
	// the answer is busy. Duplicate keys, an empty or over-long reqs
	// (more than MaxBatch), or keys Atomic refuses are errors matching
	// ErrInvalid.
	AcquireAll(ctx context.Context, reqs []AcquireRequest) (AcquireAllResult, error)
}

// AcquireAllResult is the outcome of one AcquireAll attempt.
type AcquireAllResult struct {
	// Acquired reports whether every lock of the request is now held, each
	// by its request's ID.
	Acquired bool
	// Tokens[i] is the fencing token of reqs[i], when Acquired.
	Tokens []uint64
	// Busy is, when not Acquired, the index in reqs of a lock another
	// owner holds.
	Busy int
	// RetryAfter is, when not Acquired, how long the lock at Busy has left,
	// as in AcquireResult (set when the requests have Waiting set).
	RetryAfter time.Duration
}

package once

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock"
)

// State is the state of a Record.
type State int

const (
	// InProgress: a worker claimed the key and has not finished. The claim
	// is alive exactly as long as that worker's lease on the key's lock.
	InProgress State = iota + 1
	// Completed: the work is done and Record.Result holds its result.
	Completed
	// Failed: the worker's function returned an error; the next delivery
	// runs it again.
	Failed
)

// String returns "in progress", "completed" or "failed".
func (s State) String() string {
	switch s {
	case InProgress:
		return "in progress"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Record is what a Store keeps per idempotency key.
type Record struct {
	Key   string
	State State
	// Token is the fencing token of the lease under which the record was
	// last claimed.
	Token uint64
	// PayloadHash identifies the payload the key was first used with
	// (SHA-256 of the payload bytes).
	PayloadHash []byte
	// Result is the stored result of a Completed record.
	Result []byte
	// ExpiresAt is when the store forgets the record (by the store's
	// clock; approximate for stores that keep a TTL).
	ExpiresAt time.Time
}

// Store keeps records. Every method is atomic per key: the token checks
// happen inside the store, in one script or statement, never as a read
// followed by a write. Package oncetest is the conformance suite.
type Store interface {
	// Claim makes key in progress under token, with payload hash hash and
	// expiry ttl, and reports claimed=true, when the key has no live
	// record, or its record has the same hash, is not Completed, and has a
	// token not above token (a record claimed under an older, lost lease,
	// a Failed one, or this very claim repeated). Otherwise nothing
	// changes and it returns the existing record with claimed=false.
	Claim(ctx context.Context, key string, token uint64, hash []byte, ttl time.Duration) (rec Record, claimed bool, err error)
	// Complete makes the record Completed with result and expiry ttl if it
	// is in progress under token (or already completed under token: a
	// retry). Otherwise it changes nothing and returns ErrClaimLost.
	Complete(ctx context.Context, key string, token uint64, result []byte, ttl time.Duration) error
	// Fail makes the record Failed with expiry ttl if it is in progress
	// under token (or already failed under token). Otherwise it changes
	// nothing and returns ErrClaimLost.
	Fail(ctx context.Context, key string, token uint64, ttl time.Duration) error
	// Get returns the live record of key, or ok=false.
	Get(ctx context.Context, key string) (rec Record, ok bool, err error)
}

// Errors. Each matches at most one of them with errors.Is.
var (
	// ErrPayloadMismatch: the key was used before with a different payload
	// (Stripe's rule: a key names one request, never two).
	ErrPayloadMismatch = errors.New("once: idempotency key reused with a different payload")
	// ErrInProgress: another worker holds the key's claim and the
	// processor was told not to wait (DuplicatesReplay, DuplicatesReject).
	ErrInProgress = errors.New("once: key is being processed by another worker")
	// ErrAlreadyCompleted: the key was completed before and the processor
	// was told to reject duplicates (DuplicatesReject). The Result returned
	// with it still carries the stored value.
	ErrAlreadyCompleted = errors.New("once: key was already processed")
	// ErrClaimLost: the record is no longer claimed under this worker's
	// token — its lease was lost and a newer worker claimed the key, or the
	// record expired. The store kept the newer state.
	ErrClaimLost = errors.New("once: claim lost to a newer worker")
	// ErrInvalidArgument is dlock.ErrInvalidArgument: bad input.
	ErrInvalidArgument = dlock.ErrInvalidArgument
)

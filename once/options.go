package once

import (
	"fmt"
	"time"

	"github.com/dlockio/dlock"
)

// DefaultRetention is how long a record is kept: 24 hours, Stripe's
// minimum for idempotency keys — longer than any sane redelivery window of
// a queue or a client's retries, short enough that keys do not pile up.
const DefaultRetention = 24 * time.Hour

// DefaultLockPrefix is put before a key to name its dlock lock.
const DefaultLockPrefix = "once:"

// Duplicates says what a delivery gets when its key is taken.
type Duplicates int

const (
	// DuplicatesWait (the default): a duplicate of a running delivery
	// waits for it (for as long as its ctx allows) and then gets its
	// stored result; a duplicate of a completed one gets the stored result
	// at once.
	DuplicatesWait Duplicates = iota + 1
	// DuplicatesReplay: a duplicate of a completed delivery gets the
	// stored result; a duplicate of a running one gets ErrInProgress at
	// once (Stripe's 409 Conflict).
	DuplicatesReplay
	// DuplicatesReject: every duplicate gets an error: ErrInProgress while
	// the first runs, ErrAlreadyCompleted once it completed (returned with
	// the stored result, for callers that want to log it).
	DuplicatesReject
)

// Option configures a Processor.
type Option func(*config) error

type config struct {
	retention  time.Duration
	duplicates Duplicates
	prefix     string
	lockOpts   []dlock.LockOption
}

// WithRetention sets how long records are kept, from their last change:
// a completed record answers duplicates for this long, then the key is
// new again. It is the only expiry: an in-progress record needs none,
// since its claim ends with its worker's lease. It must exceed the longest
// run of the work: a claim's record also expires after it, and an expired
// record can no longer be completed (ErrClaimLost). Default
// DefaultRetention.
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: retention %v", ErrInvalidArgument, d)
		}
		c.retention = d
		return nil
	}
}

// WithDuplicates sets what duplicates get. Default DuplicatesWait.
func WithDuplicates(d Duplicates) Option {
	return func(c *config) error {
		if d < DuplicatesWait || d > DuplicatesReject {
			return fmt.Errorf("%w: duplicates mode %d", ErrInvalidArgument, int(d))
		}
		c.duplicates = d
		return nil
	}
}

// WithLockPrefix sets what is put before a key to name its lock. Default
// DefaultLockPrefix. Two Processors on one lock store with different
// stores need different prefixes if their keys can collide.
func WithLockPrefix(p string) Option {
	return func(c *config) error { c.prefix = p; return nil }
}

// WithLockOptions passes options to every Lock and TryLock call (for
// example dlock.WithTTL: how long a crashed worker holds its key up).
func WithLockOptions(opts ...dlock.LockOption) Option {
	return func(c *config) error {
		for _, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: nil lock option", ErrInvalidArgument)
			}
		}
		c.lockOpts = append(c.lockOpts, opts...)
		return nil
	}
}

package dlock

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults, and why.
const (
	// DefaultTTL is how long a lock outlives a holder that vanished without
	// unlocking (crash, partition). 30 s, as in Redisson: long enough that a
	// renewal can miss twice (every TTL/3) through a failover or network blip
	// without losing the lock, short enough that a crashed holder blocks
	// others for at most half a minute.
	DefaultTTL = 30 * time.Second
	// MaxKeyLen bounds lock names: a longer name is a bug (a payload used as a
	// key), and every renewal would carry it.
	MaxKeyLen = 1024
	// MaxMetaLen bounds the owner meta text stored with every lock.
	MaxMetaLen = 1024
	// DefaultRetryDelay is how soon a failed renewal is retried: fast enough
	// for several attempts inside TTL/3 of the default TTL, slow enough not to
	// hammer a store that is failing over.
	DefaultRetryDelay = 500 * time.Millisecond
)

// Option configures a Client.
type Option func(*clientConfig) error

type clientConfig struct {
	ttl        time.Duration
	logger     *slog.Logger
	meta       string
	retryDelay time.Duration
	observer   Observer
	maxWaiters int              // WithDefaultMaxWaiters; 0 for no cap
	now        func() time.Time // monotonic-bearing clock; replaced in tests
}

// WithDefaultTTL sets the TTL used by Lock and TryLock unless a call passes
// WithTTL. Default DefaultTTL. It must not be below the driver's minimum
// (Redis: 20 ms), which New checks.
func WithDefaultTTL(ttl time.Duration) Option {
	return func(c *clientConfig) error {
		if ttl <= 0 {
			return fmt.Errorf("%w: %v", ErrInvalidTTL, ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithLogger sets the logger for renewal failures and lost locks. Records
// reach it through a bounded queue, so a handler that blocks never delays
// the end of a lease. Default: slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidArgument)
		}
		c.logger = l
		return nil
	}
}

// WithOwnerMeta sets free text stored with every lock this client takes
// (next to host name and pid), for operators: "order-service v1.4", say.
func WithOwnerMeta(text string) Option {
	return func(c *clientConfig) error {
		if len(text) > MaxMetaLen {
			return fmt.Errorf("%w: owner meta of %d bytes, more than %d", ErrInvalidArgument, len(text), MaxMetaLen)
		}
		c.meta = text
		return nil
	}
}

// WithRenewRetryDelay sets how soon a renewal that failed with a backend
// error is retried: after d or TTL/6, whichever is shorter, and never later
// than the lease's deadline. Default DefaultRetryDelay.
func WithRenewRetryDelay(d time.Duration) Option {
	return func(c *clientConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: renew retry delay %v", ErrInvalidArgument, d)
		}
		c.retryDelay = d
		return nil
	}
}

// WithDefaultMaxWaiters caps the store's queue of a name for this
// Client's queued acquisitions that wait (the fair Lock, RWMutex.Lock and
// RLock, Semaphore.Acquire), unless a call passes WithMaxWaiters: one that
// finds n waiters or more queued on the name, of any Client, fails at once
// with an error matching ErrQueueFull (and ErrNotAcquired) instead of
// joining them. It bounds how long a queue this Client's callers make
// the store keep, and how long they would wait behind it. Default 0: no
// cap. A negative n is ErrInvalidArgument. On Redis, places of waiters
// that died may count until the store drops them (docs/fair-lock.md).
func WithDefaultMaxWaiters(n int) Option {
	return func(c *clientConfig) error {
		if n < 0 {
			return fmt.Errorf("%w: most waiters %d", ErrInvalidArgument, n)
		}
		c.maxWaiters = n
		return nil
	}
}

// LockOption configures one Lock or TryLock call.
type LockOption func(*lockConfig) error

type lockConfig struct {
	ttl        time.Duration
	watchdog   bool
	meta       *string
	noReentry  bool     // WithoutReentry (reentrant.go)
	fifo       fifoMode // WithFIFO, WithoutFIFO (fair.go)
	maxWaiters *int     // WithMaxWaiters; nil for the Client's default
}

// WithTTL sets the lock's TTL for this call. With the watchdog on (the
// default) the lock is renewed every TTL/3 and the TTL only bounds how long
// a vanished holder blocks others; with WithoutWatchdog it is the lease time.
// It must not be below the driver's minimum (Redis: 20 ms).
func WithTTL(ttl time.Duration) LockOption {
	return func(c *lockConfig) error {
		if ttl <= 0 {
			return fmt.Errorf("%w: %v", ErrInvalidTTL, ttl)
		}
		c.ttl = ttl
		return nil
	}
}

// WithoutWatchdog makes the lease a fixed lease of TTL: it is never renewed
// and ends with ErrLockLost when its validity deadline passes.
func WithoutWatchdog() LockOption {
	return func(c *lockConfig) error { c.watchdog = false; return nil }
}

// WithMeta overrides the client's owner meta text for this lock.
func WithMeta(text string) LockOption {
	return func(c *lockConfig) error {
		if len(text) > MaxMetaLen {
			return fmt.Errorf("%w: owner meta of %d bytes, more than %d", ErrInvalidArgument, len(text), MaxMetaLen)
		}
		c.meta = &text
		return nil
	}
}

// WithMaxWaiters caps the store's queue of the name for this call, in
// place of the Client's WithDefaultMaxWaiters: a queued acquisition that
// has to wait and finds n waiters or more queued fails at once with an
// error matching ErrQueueFull (and ErrNotAcquired). 0 lifts the Client's
// cap. A negative n is ErrInvalidArgument. It applies to the acquisitions
// that queue in the store (the fair Lock, RWMutex, Semaphore); a plain
// Lock (WithoutFIFO, or etcd's default) keeps no queue there, and TryLock
// never waits.
func WithMaxWaiters(n int) LockOption {
	return func(c *lockConfig) error {
		if n < 0 {
			return fmt.Errorf("%w: most waiters %d", ErrInvalidArgument, n)
		}
		c.maxWaiters = &n
		return nil
	}
}

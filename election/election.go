package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/options"
)

// Errors, as the cause (context.Cause) of a leader's context.
var (
	// ErrResigned: the leader resigned (Resign, or Run's function returned).
	ErrResigned = errors.New("election: resigned")
	// ErrSteppedDown: renewals stalled and the leader stepped down with the
	// step-down margin left on its lease, before anyone else could lead.
	ErrSteppedDown = errors.New("election: stepped down: lease renewal stalled")
	// ErrInvalidArgument is dlock.ErrInvalidArgument.
	ErrInvalidArgument = dlock.ErrInvalidArgument
)

// Defaults.
const (
	// DefaultPollInterval is how often Observe asks the store who leads:
	// a change made by another process is seen within it. One Inspect
	// round trip per interval per observer.
	DefaultPollInterval = time.Second
	// DefaultRetryDelay is how long Run waits before campaigning again
	// after a store failure.
	DefaultRetryDelay = time.Second
)

// Election is one leader role, named by a lock key. It is safe for
// concurrent use; one process may campaign through several Elections on
// the same key (each campaign is its own acquisition).
type Election struct {
	locks *dlock.Client
	key   string
	cfg   config

	mu    sync.Mutex
	kicks map[chan struct{}]struct{} // observers to wake on a local change
}

// Option configures an Election.
type Option func(*config) error

type config struct {
	identity   *string
	lockOpts   []dlock.LockOption
	margin     time.Duration // 0: the lease's TTL / 6
	poll       time.Duration
	retryDelay time.Duration
}

// WithIdentity names this candidate for Leader and Observe (stored as the
// lock's owner meta). Default: the Client's owner meta.
func WithIdentity(id string) Option {
	return func(c *config) error {
		if len(id) > dlock.MaxMetaLen {
			return fmt.Errorf("%w: identity of %d bytes, more than %d", ErrInvalidArgument, len(id), dlock.MaxMetaLen)
		}
		c.identity = &id
		return nil
	}
}

// WithLockOptions passes options to every Lock call (dlock.WithTTL: how
// long a crashed leader holds the role; the default is the Client's TTL).
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

// WithStepDownMargin sets how long before its lease's validity deadline a
// leader whose renewals have stalled steps down (its context ends with
// ErrSteppedDown): the time its work has to stop before the role can pass
// on. It must be below half the TTL; default TTL/6, which leaves renewals
// (every TTL/3) two chances. With the default 30 s TTL: 5 s.
func WithStepDownMargin(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: step-down margin %v", ErrInvalidArgument, d)
		}
		c.margin = d
		return nil
	}
}

// WithPollInterval sets how often Observe asks who leads. Default
// DefaultPollInterval.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: poll interval %v", ErrInvalidArgument, d)
		}
		c.poll = d
		return nil
	}
}

// WithRetryDelay sets how long Run waits to campaign again after a store
// failure. Default DefaultRetryDelay.
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: retry delay %v", ErrInvalidArgument, d)
		}
		c.retryDelay = d
		return nil
	}
}

// New returns the Election of key on locks.
func New(locks *dlock.Client, key string, opts ...Option) (*Election, error) {
	if locks == nil {
		return nil, fmt.Errorf("%w: nil lock client", ErrInvalidArgument)
	}
	if err := locks.CheckKey(key); err != nil {
		return nil, err
	}
	// A campaign never nests (dlock's reentrancy through the context): a
	// Campaign under a term's own context would otherwise return a second
	// Leadership of the same term. It gets dlock.ErrReentry at once.
	cfg := config{poll: DefaultPollInterval, retryDelay: DefaultRetryDelay,
		lockOpts: []dlock.LockOption{dlock.WithoutReentry()}}
	if err := options.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	if cfg.identity != nil {
		cfg.lockOpts = append(cfg.lockOpts, dlock.WithMeta(*cfg.identity))
	}
	return &Election{locks: locks, key: key, cfg: cfg, kicks: make(map[chan struct{}]struct{})}, nil
}

// Key returns the election's lock key.
func (e *Election) Key() string { return e.key }

// Campaign blocks until this candidate leads or ctx ends (the error then
// matches ctx.Err()); a store failure returns an error matching
// dlock.ErrBackend. The Leadership must be ended with Resign.
func (e *Election) Campaign(ctx context.Context) (*Leadership, error) {
	lease, err := e.locks.Lock(ctx, e.key, e.cfg.lockOpts...)
	if err != nil {
		return nil, err
	}
	margin := e.cfg.margin
	if margin == 0 {
		margin = lease.TTL() / 6
	}
	if margin >= lease.TTL()/2 {
		_ = lease.Unlock(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: step-down margin %v is not below half the TTL %v", ErrInvalidArgument, margin, lease.TTL())
	}
	l := newLeadership(lease, margin, e.kick)
	e.kick()
	return l, nil
}

// kick wakes this Election's observers at once, so a local change is seen
// without waiting for the next poll. It never blocks.
func (e *Election) kick() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

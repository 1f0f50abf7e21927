// Package dlock provides distributed locks that stay correct when things go
// wrong: atomic acquisition, ownership-checked release and renewal, a
// watchdog that renews held locks, a lost-lock signal that fires before the
// lock can expire in the store, fencing tokens on every acquisition, and
// waiting by notification instead of polling.
//
// A Client talks to one store through a driver: redisdriver for Redis
// (redisdriver.Open is the one-call setup), memdriver for unit tests. Lock
// and TryLock return a *Lease. Applications never need package driver.
package dlock

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
	"github.com/dlockio/dlock/internal/options"
)

// Owner describes who holds a lock: host name, process id and the free
// text set with WithOwnerMeta or WithMeta.
type Owner = driver.Owner

// LockInfo is what Inspect and List report about a held lock.
type LockInfo = driver.LockInfo

// Client acquires locks from one store. It is safe for concurrent use; one
// Client per process is the intended use (its watchdog renews all its leases
// in batches and its waiters share one notification stream).
//
// Leases of one Client exclude each other like leases of different clients:
// every acquisition has its own random owner id. The exception is a Lock
// whose ctx descends from a lease's Context: a nested hold (see Lease).
type Client struct {
	drv driver.Driver
	e   *engine.Engine
	// What the driver can do, asked once, in New.
	caps   driver.Capabilities
	minTTL time.Duration
	queues bool // the driver keeps queued leases (driver.Queuer)
	cfg    clientConfig
	host   string
	pid    int

	closeOnce sync.Once
	closeErr  error
}

// New returns a Client using drv. Close closes the driver too; a driver
// made from a store client the application passed in (redisdriver.New)
// leaves that client open, for the application to close after the Client.
func New(drv driver.Driver, opts ...Option) (*Client, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalidArgument)
	}
	cfg := clientConfig{ttl: DefaultTTL, retryDelay: DefaultRetryDelay, now: time.Now}
	if err := options.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	ecfg := engine.Config{Driver: drv, Logger: cfg.logger, RetryDelay: cfg.retryDelay, Now: cfg.now}
	if cfg.observer != nil {
		ecfg.Observer = cfg.observer
	}
	e, err := engine.New(ecfg)
	if err != nil {
		return nil, err
	}
	caps := drv.Capabilities() // checked by engine.New
	minTTL := engine.MinTTL(caps)
	if cfg.ttl < minTTL {
		_ = e.Close()
		return nil, fmt.Errorf("%w: default TTL %v is below the minimum %v", ErrInvalidTTL, cfg.ttl, minTTL)
	}
	if _, ok := roundTTL(cfg.ttl, caps.TTLUnit); !ok {
		_ = e.Close()
		return nil, fmt.Errorf("%w: default TTL %v is too long for the store's unit %v", ErrInvalidTTL, cfg.ttl, caps.TTLUnit)
	}
	_, queues := drv.(driver.Queuer)
	host, _ := os.Hostname()
	return &Client{drv: drv, e: e, caps: caps, minTTL: minTTL, queues: queues, cfg: cfg, host: host, pid: os.Getpid()}, nil
}

// TryLock makes one attempt to acquire key. It returns ErrNotAcquired when
// another owner holds the lock. Under the Context of a live lease of this
// Client on key it is a nested hold instead (see Lease).
func (c *Client) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	return c.lock(ctx, key, opts, true)
}

// Lock acquires key, waiting as long as ctx allows. On the Redis, etcd and
// in-memory drivers it waits its turn in a queue kept by the store, first
// come first served, and the holder's release hands the lock straight to
// the first waiter (WithFIFO; WithoutFIFO opts out). Otherwise (with
// WithoutFIFO, or on a driver without a queue) it is woken by the release notification of the current holder,
// and in any case after the holder's remaining TTL. When ctx ends first
// the error satisfies errors.Is(err, ctx.Err()) — whatever timeouts the
// store client was built with; a store failure returns an error matching
// ErrBackend as soon as the driver reports it.
//
// Under the Context of a live lease of this Client on key (ctx descends
// from it), Lock is a nested hold of that lease: no round trip, the same
// token, ended with the outer lease; with WithoutReentry it fails with
// ErrReentry instead. Leases of other Clients never nest: they exclude
// each other like separate processes.
func (c *Client) Lock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	return c.lock(ctx, key, opts, false)
}

// lock is Lock, or TryLock with try: they differ only in the acquisition,
// one attempt or a wait.
func (c *Client) lock(ctx context.Context, key string, opts []LockOption, try bool) (*Lease, error) {
	req, lc, err := c.prepare(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	if err := c.refuseNested(ctx, key, driver.ModeExclusive); err != nil {
		return nil, err
	}
	if lc.fifo == fifoOn && !c.queues {
		// Before reenter: a nested call's options are checked too.
		return nil, fmt.Errorf("%w: FIFO lock of %q: the driver has no queued leases", ErrUnsupported, key)
	}
	head := marks(ctx)
	if l, ok, err := c.reenter(ctx, head, key, lc); ok {
		return l, err
	}
	var h *engine.Hold
	switch {
	case c.queued(lc, try):
		h, err = c.acquireFIFO(ctx, req, lc, try)
	default:
		h, err = c.e.Acquire(ctx, engine.Request{Key: req.Key, TTL: req.TTL, Owner: req.Owner, Wait: !try, Renew: lc.watchdog})
	}
	if err != nil {
		return nil, err
	}
	return c.newLease(h, req.Owner, head, lc), nil
}

// newLease wraps a new acquisition; head is the innermost mark of the
// ctx it was taken with.
func (c *Client) newLease(h *engine.Hold, owner Owner, head *mark, lc lockConfig) *Lease {
	l := &Lease{lease[*engine.Hold]{a: h, c: c, owner: owner}}
	l.m = mark{c: c, parent: head, lease: l, noReentry: lc.noReentry}
	return l
}

func (c *Client) prepare(ctx context.Context, key string, opts []LockOption) (driver.AcquireRequest, lockConfig, error) {
	lc := lockConfig{ttl: c.cfg.ttl, watchdog: true}
	if ctx == nil {
		return driver.AcquireRequest{}, lc, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := c.CheckKey(key); err != nil {
		return driver.AcquireRequest{}, lc, err
	}
	for _, o := range opts {
		if o == nil {
			return driver.AcquireRequest{}, lc, fmt.Errorf("%w: nil lock option", ErrInvalidArgument)
		}
		if err := o(&lc); err != nil {
			return driver.AcquireRequest{}, lc, err
		}
	}
	if lc.ttl < c.minTTL {
		return driver.AcquireRequest{}, lc, fmt.Errorf("%w: %v is below the minimum %v", ErrInvalidTTL, lc.ttl, c.minTTL)
	}
	ttl, ok := roundTTL(lc.ttl, c.caps.TTLUnit)
	if !ok {
		return driver.AcquireRequest{}, lc, fmt.Errorf("%w: %v is too long for the store's unit %v", ErrInvalidTTL, lc.ttl, c.caps.TTLUnit)
	}
	lc.ttl = ttl
	meta := c.cfg.meta
	if lc.meta != nil {
		meta = *lc.meta
	}
	return driver.AcquireRequest{
		Key:   key,
		TTL:   lc.ttl,
		Owner: driver.Owner{Host: c.host, PID: c.pid, Meta: meta},
	}, lc, nil
}

// roundTTL rounds ttl up to the store's unit, so that the TTL the store
// applies is exactly the one the validity deadline assumes. ok is false
// when the rounded TTL would not fit a time.Duration (a TTL within a unit
// of 292 years: math.MaxInt64 meant as "forever" wrapped to a negative
// TTL before).
func roundTTL(ttl, unit time.Duration) (rounded time.Duration, ok bool) {
	r := ttl % unit
	if r == 0 {
		return ttl, true
	}
	if ttl > math.MaxInt64-(unit-r) {
		return 0, false
	}
	return ttl + unit - r, true
}

// CheckKey reports whether key can name a lock on this Client's store; the
// error matches ErrInvalidKey. Lock and TryLock check keys themselves; tools
// that address locks by name without taking them use this.
func (c *Client) CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if kc, ok := c.drv.(driver.KeyChecker); ok {
		if err := kc.CheckKey(key); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidKey, err)
		}
	}
	return nil
}

// Close ends every lease still held at once with ErrClosed, stops waiting
// calls, waits for calls in flight (an acquisition that completes meanwhile
// is released, so no lock is left held by nobody), releases the ended
// leases in batches (for at most a few seconds; what is left expires with
// its TTL), stops every goroutine of the Client, and closes the driver.
// Calls in flight return within the store client's own timeouts.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		err := c.e.Close()
		if derr := c.drv.Close(); err == nil {
			err = derr
		}
		c.closeErr = err
	})
	return c.closeErr
}

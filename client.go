// Package dlock provides distributed locks that stay correct when things go
// wrong: atomic acquisition, ownership-checked release and renewal, a
// watchdog that renews held locks, a lost-lock signal that fires before the
// lock can expire in the store, fencing tokens on every acquisition, and
// waiting by notification instead of polling.
//
// A Client talks to one store through a driver (see package driver and the
// redisdriver package). Lock and TryLock return a *Lease.
package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Client acquires locks from one store. It is safe for concurrent use; one
// Client per process is the intended use (its watchdog renews all its leases
// in batches and its waiters share one notification stream).
//
// Leases of one Client exclude each other like leases of different clients:
// every acquisition has its own random owner id.
type Client struct {
	drv      driver.Driver
	cfg      clientConfig
	host     string
	pid      int
	watchdog *watchdog
	waits    *waitRegistry

	closeOnce sync.Once
	closed    chan struct{}

	bgMu      sync.Mutex
	bgStopped bool           // set by Close before it waits for bg
	bg        sync.WaitGroup // best-effort releases running detached
}

// New returns a Client using drv. The Client does not own drv's underlying
// connection: close the Client, then the driver's client.
func New(drv driver.Driver, opts ...Option) (*Client, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalidArgument)
	}
	cfg := clientConfig{
		ttl:        DefaultTTL,
		logger:     slog.Default(),
		retryDelay: DefaultRetryDelay,
		now:        time.Now,
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	c := &Client{drv: drv, cfg: cfg, host: host, pid: os.Getpid(), closed: make(chan struct{})}
	c.watchdog = newWatchdog(c)
	c.waits = newWaitRegistry(c)
	return c, nil
}

// TryLock makes one attempt to acquire key. It returns ErrNotAcquired when
// another owner holds the lock.
func (c *Client) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	req, lc, err := c.prepare(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	lease, _, err := c.attempt(ctx, req, lc)
	if err != nil {
		return nil, err
	}
	if lease == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotAcquired, key)
	}
	return lease, nil
}

// Lock acquires key, waiting as long as ctx allows. While it waits it is
// woken by the release notification of the current holder, and in any case
// after the holder's remaining TTL. When ctx ends first the error satisfies
// errors.Is(err, ctx.Err()); a store failure returns an error matching
// ErrBackend at once.
func (c *Client) Lock(ctx context.Context, key string, opts ...LockOption) (*Lease, error) {
	req, lc, err := c.prepare(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	lease, _, err := c.patientAttempt(ctx, req, lc)
	if lease != nil || err != nil {
		return lease, err
	}
	return c.wait(ctx, req, lc)
}

// errTooSlow: the store granted the lock, but its reply arrived after the
// lease's validity deadline.
var errTooSlow = errors.New("reply arrived after the lease's validity deadline")

// patientAttempt is attempt for Lock: a grant whose reply came too late
// (a cold connection, a hiccup) is retried a few times before Lock gives up
// with the backend error; a store that is always slower than the TTL fails.
func (c *Client) patientAttempt(ctx context.Context, req driver.AcquireRequest, lc lockConfig) (*Lease, time.Duration, error) {
	for i := 1; ; i++ {
		l, retry, err := c.attempt(ctx, req, lc)
		if i == 3 || !errors.Is(err, errTooSlow) {
			return l, retry, err
		}
	}
}

func (c *Client) prepare(ctx context.Context, key string, opts []LockOption) (driver.AcquireRequest, lockConfig, error) {
	lc := lockConfig{ttl: c.cfg.ttl, watchdog: true}
	if ctx == nil {
		return driver.AcquireRequest{}, lc, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := CheckKey(key); err != nil {
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
	// The store counts whole milliseconds: round up, so that the TTL the
	// store applies is exactly the one the validity deadline assumes.
	lc.ttl = (lc.ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	meta := c.cfg.meta
	if lc.meta != nil {
		meta = *lc.meta
	}
	if len(meta) > MaxMetaLen {
		return driver.AcquireRequest{}, lc, fmt.Errorf("%w: owner meta of %d bytes, more than %d", ErrInvalidArgument, len(meta), MaxMetaLen)
	}
	return driver.AcquireRequest{
		Key:   key,
		TTL:   lc.ttl,
		Owner: driver.Owner{Host: c.host, PID: c.pid, Meta: meta},
	}, lc, nil
}

// attempt makes one acquisition attempt with a fresh owner id. It returns
// the lease when acquired, else how long the holder's lock has left.
func (c *Client) attempt(ctx context.Context, req driver.AcquireRequest, lc lockConfig) (*Lease, time.Duration, error) {
	if c.isClosed() {
		return nil, 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	req.ID = newOwnerID()
	sent := c.cfg.now()
	res, err := c.drv.Acquire(ctx, req)
	if err != nil {
		// The script may have run with its reply lost: release what we
		// may hold so it does not block others for a whole TTL.
		c.releaseInBackground(req.Key, req.ID)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, 0, fmt.Errorf("dlock: lock %q: %w", req.Key, ctxErr)
		}
		return nil, 0, wrapBackend("lock", req.Key, err)
	}
	if !res.Acquired {
		return nil, res.RetryAfter, nil
	}
	if valid := validity(req.TTL); c.cfg.now().Sub(sent) >= valid {
		// Granted, but the answer took longer than the lease is valid: the
		// lock may already have expired for everyone else. Never hand out a
		// lease that is over before it starts.
		c.releaseInBackground(req.Key, req.ID)
		return nil, 0, wrapBackend("lock", req.Key, fmt.Errorf("%w: took %v, validity %v",
			errTooSlow, c.cfg.now().Sub(sent).Round(time.Millisecond), valid))
	}
	l := &Lease{c: c, key: req.Key, id: req.ID, token: res.Token, ttl: req.TTL, owner: req.Owner}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if !c.watchdog.add(l, sent, lc.watchdog) {
		// Close raced with this acquisition.
		l.end(ErrClosed)
		c.releaseInBackground(req.Key, req.ID)
		return nil, 0, ErrClosed
	}
	return l, 0, nil
}

// releaseInBackground releases an acquisition nobody will use. It runs
// detached from the caller's context (which may be what just failed) and is
// bounded in time; Close waits for it, and once Close is waiting it runs
// inline so that no goroutine outlives the Client.
func (c *Client) releaseInBackground(key, id string) {
	release := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.drv.Release(ctx, driver.ReleaseRequest{Key: key, ID: id}); err != nil {
			c.cfg.logger.Debug("dlock: best-effort release failed", "key", key, "err", err)
		}
	}
	c.bgMu.Lock()
	if c.bgStopped {
		c.bgMu.Unlock()
		release()
		return
	}
	c.bg.Add(1)
	c.bgMu.Unlock()
	go func() {
		defer c.bg.Done()
		release()
	}()
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Close stops the watchdog, releases every lease still held (best effort,
// bounded by ctx-free 5 s timeouts), ends those leases with ErrClosed, stops
// waiting calls, and waits for all of the Client's goroutines to exit. It
// does not close the driver's underlying connection.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		leases := c.watchdog.stop()
		for _, l := range leases {
			l.end(ErrClosed)
			c.releaseInBackground(l.key, l.id)
		}
		err = c.waits.close()
		c.bgMu.Lock()
		c.bgStopped = true
		c.bgMu.Unlock()
		c.bg.Wait()
	})
	return err
}

func newOwnerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

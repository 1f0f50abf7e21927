package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultPrefix starts every key dlock writes.
const DefaultPrefix = "dlock/"

// MaxBatch is the most requests one Renew or Release call carries
// (Capabilities.MaxBatch). A batch is one Txn, and etcd refuses a Txn with
// more than --max-txn-ops operations (128 by default) at any nesting
// level: a release is a nested Txn of two compares inside the outer one,
// so 100 stay below the limit.
const MaxBatch = 100

// MinTTL is the shortest lock TTL (Capabilities.MinTTL): etcd's default
// minimum lease TTL, 1.5 election timeouts of 1 s rounded up. etcd raises
// a shorter grant to it silently, and a leader election alone takes about
// that long.
const MinTTL = 2 * time.Second

// DefaultRequestTimeout bounds every request to etcd that the caller's
// context leaves unbounded (see WithRequestTimeout).
const DefaultRequestTimeout = 5 * time.Second

const (
	lockSpace   = "k/" // after the prefix: the lock keys
	markerSpace = "r/" // after the prefix: release markers
	sep         = " "  // between the fields of a lock value
)

// Driver implements driver.Driver and driver.Inspector on etcd. Make one
// with New; Open makes one that owns its etcd client, inside a dlock
// Client.
type Driver struct {
	cli        *clientv3.Client
	prefix     string
	timeout    time.Duration
	ownsClient bool // made by Open: Close closes cli

	leases  *leasePool
	markers *markerLease
	expiry  *expiryWatches
	busy    busyNames // for Enqueue, see enqueueOnce

	// silentAt is when a release last went unanswered for long (see
	// noteSilence); nil until one does.
	silentAt atomic.Pointer[time.Time]

	closeOnce sync.Once
	closeErr  error
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Inspector = (*Driver)(nil)
	_ driver.Queuer    = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver) error

// WithPrefix sets the prefix of every key the driver writes. Default
// DefaultPrefix. Drivers with different prefixes never see each other's
// locks.
func WithPrefix(prefix string) Option {
	return func(d *Driver) error {
		if prefix == "" {
			return fmt.Errorf("%w: empty key prefix", driver.ErrInvalid)
		}
		d.prefix = prefix
		return nil
	}
}

// WithRequestTimeout bounds each request to etcd, for calls whose context
// has no earlier deadline: this is what turns a cluster that accepts
// connections and does not answer into an error. Endpoints that refuse
// connections fail a call at once on a client of ParseEndpoints'
// configuration (Open's); another etcd client waits for a connection until
// this timeout. Default DefaultRequestTimeout.
func WithRequestTimeout(d time.Duration) Option {
	return func(dr *Driver) error {
		if d <= 0 {
			return fmt.Errorf("%w: request timeout %v, want > 0", driver.ErrInvalid, d)
		}
		dr.timeout = d
		return nil
	}
}

// New returns a Driver using cli. The caller keeps ownership of cli and
// closes it after the dlock Client. A nil cli is an error matching
// driver.ErrInvalid.
func New(cli *clientv3.Client, opts ...Option) (*Driver, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", driver.ErrInvalid)
	}
	d := &Driver{cli: cli, prefix: DefaultPrefix, timeout: DefaultRequestTimeout}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", driver.ErrInvalid)
		}
		if err := o(d); err != nil {
			return nil, err
		}
	}
	d.leases = newLeasePool(cli)
	d.markers = &markerLease{cli: cli}
	d.expiry = newExpiryWatches(d)
	return d, nil
}

// Capabilities implements driver.Driver.
//
// Lease TTLs are whole seconds. etcd never expires a lease earlier than
// its TTL after the leader handled the grant or keep-alive (which is
// after it was sent); a new leader even extends every lease by an election
// timeout. A lock put on a shared lease lasts a TTL from that lease's
// last keep-alive, which may have been sent up to keepAliveReuse before
// the acquisition: that is the ExpiryMargin. Every call honours its
// context (gRPC cancels the request), so the driver is ContextAware.
// QueueByDefault: an uncontended acquisition through the queue is one Txn,
// as a plain one is, and under contention the queue wakes one waiter per
// release where plain waiters all race (BenchmarkFairVersusPlain,
// docs/benchmarks.md).
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		TTLUnit:        time.Second,
		MinTTL:         MinTTL,
		ExpiryMargin:   keepAliveReuse,
		MaxBatch:       MaxBatch,
		ContextAware:   true,
		QueueByDefault: true,
	}
}

// Client returns the etcd client the driver uses.
func (d *Driver) Client() *clientv3.Client { return d.cli }

// callCtx bounds a request by the driver's timeout, unless ctx ends
// earlier.
func (d *Driver) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d.timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// checkLease rejects a Renew or Release request of a lease this driver
// cannot name: an unknown kind or an id checkID refuses.
func checkLease(k driver.Kind, id string) error {
	if err := k.Check(); err != nil {
		return err
	}
	return checkID(id)
}

// checkID rejects owner ids the lock value format cannot carry: the value
// starts with the id and a space, and ownership is compared as the byte
// range [id+" ", id+"!"), which holds exactly the values starting with
// id+" " only if no id contains a byte at or below the space.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty owner id", driver.ErrInvalid)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' {
			return fmt.Errorf("%w: owner id %q contains a space or control byte", driver.ErrInvalid, id)
		}
	}
	return nil
}

// ttlSeconds converts a TTL to etcd's whole seconds; it must be a positive
// multiple of a second.
func ttlSeconds(ttl time.Duration) (int64, error) {
	if ttl < time.Second || ttl%time.Second != 0 {
		return 0, fmt.Errorf("%w: ttl %v (etcd needs a whole number of seconds, at least 1s)", driver.ErrInvalid, ttl)
	}
	return int64(ttl / time.Second), nil
}

func (d *Driver) lockKey(name string) string { return d.prefix + lockSpace + name }

// markerKey is the release marker of id's lock of name: one per release,
// so that a retried release is recognised also after later holders
// released the name too.
func (d *Driver) markerKey(name, id string) string {
	return d.prefix + markerSpace + lenPrefixed(name) + id
}

// nameOf inverts lockKey.
func (d *Driver) nameOf(key []byte) string {
	return strings.TrimPrefix(string(key), d.prefix+lockSpace)
}

// closeTimeout bounds Close's revocations: a process shutting down during
// an outage should not wait for the store, and what Close could not revoke
// expires with its lease's TTL.
const closeTimeout = time.Second

// silentFor is how long a release must have waited for an answer in vain
// for Close to take the store as silent (noteSilence).
const silentFor = closeTimeout / 2

// noteSilence records that a release which waited since start ended
// without an answer, because its context's deadline passed (err is nil
// when the call was answered). A Client's Close releases its locks before
// it closes the driver, and gives up after 0.8 s without an answer
// (docs/lease.md): the driver's own revocation would then only wait for
// the same silent store a second time.
func (d *Driver) noteSilence(ctx context.Context, start time.Time, err error) {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Since(start) >= silentFor {
		now := time.Now()
		d.silentAt.Store(&now)
	}
}

// silentLately reports whether a release went unanswered (noteSilence)
// within the last closeTimeout.
func (d *Driver) silentLately() bool {
	at := d.silentAt.Load()
	return at != nil && time.Since(*at) < closeTimeout
}

// Close implements driver.Driver. It revokes the driver's leases — which
// deletes any lock still attached to them, so none outlives its Client by
// a TTL — for at most a second (or the request timeout, if shorter): what
// it could not revoke by then expires with its lease. It does not try
// when a release went unanswered for half a second or more within the
// last second (noteSilence). It closes the etcd
// client only if the driver made it (Open); a client passed to New is the
// caller's to close.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.expiry.close()
		if !d.silentLately() {
			ctx, cancel := context.WithTimeout(context.Background(), min(closeTimeout, d.timeout))
			d.leases.revokeAll(ctx)
			d.markers.revoke(ctx)
			cancel()
		}
		if d.ownsClient {
			d.closeErr = d.cli.Close()
		}
	})
	return d.closeErr
}

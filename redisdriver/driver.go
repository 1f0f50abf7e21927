// Package redisdriver is the Redis backend of dlock, built on go-redis v9.
// It accepts any redis.UniversalClient: a plain client, a Sentinel failover
// client, or a Cluster client.
//
// Data layout, for a lock named NAME and the default prefix "dlock:":
//
//	dlock:{NAME}            held: "<id>:<token>:<since ms>:<owner JSON>", expiring with the lock;
//	                        released: "~<id>:" for a minute, so a retried release is recognised
//	dlock:{NAME}:fence      last fencing token issued (kept: tokens must never repeat)
//	dlock:{NAME}:released   pub/sub channel that wakes waiters
//
// The {NAME} hash tag puts all of a lock's keys in one Cluster slot, so each
// operation is one script call on one node.
package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every key and channel dlock writes.
const DefaultPrefix = "dlock:"

// DefaultReleaseMemory is how long a released lock remembers its last
// holder: a client that retries Unlock after losing the reply within this
// time is told the lock was released rather than "not held" (unless another
// owner has taken and released the lock in between).
const DefaultReleaseMemory = time.Minute

// Driver implements driver.Driver and driver.Inspector on Redis.
type Driver struct {
	rdb           redis.UniversalClient
	cluster       *redis.ClusterClient // non-nil in Cluster mode: batches are grouped by slot
	prefix        string
	releaseMemory time.Duration
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Inspector = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver) error

// WithPrefix sets the prefix of every key and channel. Default DefaultPrefix.
func WithPrefix(prefix string) Option {
	return func(d *Driver) error {
		if strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: prefix %q must not contain braces (they delimit the hash tag)", driver.ErrInvalid, prefix)
		}
		d.prefix = prefix
		return nil
	}
}

// WithReleaseMemory sets how long a release is remembered for retried
// Unlock calls. Default DefaultReleaseMemory.
func WithReleaseMemory(d time.Duration) Option {
	return func(dr *Driver) error {
		if d < time.Millisecond {
			return fmt.Errorf("%w: release memory %v", driver.ErrInvalid, d)
		}
		dr.releaseMemory = d
		return nil
	}
}

// New returns a Driver using rdb. The caller keeps ownership of rdb and
// closes it after the dlock Client.
func New(rdb redis.UniversalClient, opts ...Option) (*Driver, error) {
	if rdb == nil || isNilClient(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", driver.ErrInvalid)
	}
	d := &Driver{rdb: rdb, prefix: DefaultPrefix, releaseMemory: DefaultReleaseMemory}
	d.cluster, _ = rdb.(*redis.ClusterClient)
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", driver.ErrInvalid)
		}
		if err := o(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// isNilClient catches typed nil pointers in the interface.
func isNilClient(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

func (d *Driver) lockKey(name string) string { return d.prefix + "{" + name + "}" }
func (d *Driver) fenceKey(name string) string {
	return d.lockKey(name) + ":fence"
}
func (d *Driver) channel(name string) string { return d.lockKey(name) + ":released" }

// nameFromChannel inverts channel; ok is false for foreign channels.
func (d *Driver) nameFromChannel(ch string) (string, bool) {
	s, ok := strings.CutPrefix(ch, d.prefix+"{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(s, "}:released")
}

// Acquire implements driver.Driver.
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	v, err := acquireScript.Run(ctx, d.rdb, []string{d.lockKey(req.Key), d.fenceKey(req.Key)},
		req.ID, req.TTL.Milliseconds(), ownerJSON(req.Owner), time.Now().UnixMilli()).Int64Slice()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if len(v) != 2 {
		return driver.AcquireResult{}, fmt.Errorf("acquire script: unexpected reply %v", v)
	}
	if v[0] == 1 {
		return driver.AcquireResult{Acquired: true, Token: uint64(v[1])}, nil
	}
	return driver.AcquireResult{RetryAfter: time.Duration(v[1]) * time.Millisecond}, nil
}

// Release implements driver.Driver.
func (d *Driver) Release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	n, err := releaseScript.Run(ctx, d.rdb, []string{d.lockKey(req.Key)},
		idPrefix(req.ID), d.releaseMemory.Milliseconds(), d.channel(req.Key)).Int64()
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return driver.Released, nil
	case 2:
		return driver.AlreadyReleased, nil
	case 0:
		return driver.NotHeld, nil
	}
	return 0, fmt.Errorf("release script: unexpected reply %d", n)
}

// ForceRelease implements driver.Inspector.
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	v, err := forceReleaseScript.Run(ctx, d.rdb, []string{d.lockKey(key)}, d.channel(key)).Text()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var info driver.LockInfo
	if err := parseValue(v, &info); err != nil {
		return 0, true, err
	}
	return info.Token, true, nil
}

// Close implements driver.Driver. The redis client is the caller's to close.
func (d *Driver) Close() error { return nil }

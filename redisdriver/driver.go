// Package redisdriver is the Redis backend of dlock, built on go-redis v9.
// It accepts any redis.UniversalClient: a plain client, a Sentinel failover
// client, or a Cluster client.
//
// Data layout, for a lock named NAME and the default prefix "dlock:":
//
//	dlock:{NAME}            "<id>:<since ms>:<owner JSON>" while held, expiring with the lock
//	dlock:{NAME}:fence      fencing counter: the latest token issued (kept, so tokens never repeat)
//	dlock:{NAME}:last       the last released lock's value, for as long as its TTL had left
//	dlock:{NAME}:released   pub/sub channel that wakes waiters
//
// The {NAME} hash tag puts all of a lock's keys in one Cluster slot, so each
// operation is one script call or one pipeline on one node.
package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every key and channel dlock writes.
const DefaultPrefix = "dlock:"

// Driver implements driver.Driver and driver.Inspector on Redis.
type Driver struct {
	rdb        redis.UniversalClient
	cluster    *redis.ClusterClient // non-nil in Cluster mode: batches are grouped by slot
	prefix     string
	known      *nameSet // lock names whose fencing counter exists
	ownerCache atomic.Pointer[ownerEncoding]
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

// New returns a Driver using rdb. The caller keeps ownership of rdb and
// closes it after the dlock Client.
func New(rdb redis.UniversalClient, opts ...Option) (*Driver, error) {
	if rdb == nil || isNilClient(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", driver.ErrInvalid)
	}
	d := &Driver{rdb: rdb, prefix: DefaultPrefix, known: newNameSet()}
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
func (d *Driver) lastKey(name string) string { return d.lockKey(name) + ":last" }
func (d *Driver) channel(name string) string { return d.lockKey(name) + ":released" }

// nameFromChannel inverts channel; ok is false for foreign channels.
func (d *Driver) nameFromChannel(ch string) (string, bool) {
	s, ok := strings.CutPrefix(ch, d.prefix+"{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(s, "}:released")
}

// ForceRelease implements driver.Inspector. The token it returns is the
// latest the fencing counter issued (see Inspect).
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	v, err := forceReleaseScript.Run(ctx, d.rdb, []string{d.lockKey(key), d.fenceKey(key)}, d.channel(key)).StringSlice()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(v) != 2 {
		return 0, true, fmt.Errorf("force release script: unexpected reply %q", v)
	}
	token, err := strconv.ParseUint(v[1], 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("malformed fencing counter %q: %w", v[1], err)
	}
	return token, true, nil
}

// Close implements driver.Driver. The redis client is the caller's to close.
func (d *Driver) Close() error { return nil }

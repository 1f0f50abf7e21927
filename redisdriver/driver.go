package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/options"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every key and channel dlock writes.
const DefaultPrefix = "dlock:"

// MaxBatch is the most requests one Renew or Release call should carry
// (Capabilities.MaxBatch). A script runs alone on the server's one thread,
// so every other client waits while a batch's script runs: a thousand
// renewals are a pause they absorb (docs/benchmarks.md); much larger
// batches would stretch it.
const MaxBatch = 1000

const (
	sep           = ":"         // between the fields of a lock value
	lastSuffix    = ":last"     // after the lock key: the last released lock
	channelSuffix = ":released" // after the lock key: the release channel
	waitingSuffix = ":n"        // after the lock key: a plain Lock waits (note_waiting in lib.lua)
)

// Driver implements driver.Driver, driver.KeyChecker and driver.Inspector
// on Redis. Make one with New; Open makes one that owns its Redis client,
// inside a dlock Client.
type Driver struct {
	rdb        redis.UniversalClient
	cluster    *redis.ClusterClient // non-nil in Cluster mode: batches are grouped by slot
	layout     *layout              // non-nil in Cluster mode: reloads a stale layout (layout.go)
	prefix     string
	ownsClient bool // made by Open: Close closes rdb
	closeOnce  sync.Once
	closeErr   error
	ownerCache atomic.Pointer[ownerEncoding]
	// noFunctions: run scripts (EVALSHA), not the function library
	// (library.go); cleared by WithFunctions, set again when the server
	// refuses the library.
	noFunctions atomic.Bool
	loading     chan struct{} // held by the one load of the library under way (library.go)
	loads       atomic.Uint64 // loads of the library done
	waiters     queuedWaiters // woken when their grants' subscription is back (waiters.go)
	ack         *replicaAck   // WithReplicaAck or WithAOFAck, or nil (replica.go)
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.KeyChecker = (*Driver)(nil)
	_ driver.Inspector  = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver) error

// WithFunctions makes the Driver run its Lua as one function library
// (FCALL, loaded with FUNCTION LOAD on Redis 7 and later) instead of as
// scripts (EVALSHA), which is cheaper for the server (docs/benchmarks.md).
//
// Use it only on a server where no user you do not trust may run
// FUNCTION LOAD (the ACL categories @scripting, @write and @all include
// it): a function is found by its name, and a user allowed to load one
// can replace the library with code that then runs with the rights of
// every dlock client that calls it (docs/security.md). A script is found
// by the SHA1 of its own code, so nobody can put other code under it.
// The Driver checks the code of a library it finds already loaded, but
// cannot see a replacement made after that.
//
// With it, the Driver switches back to scripts by itself on a server that
// refuses functions, after one refused FCALL (and FUNCTION LOAD, when that
// is what an ACL refuses), or that holds other code under the library's
// name.
func WithFunctions() Option {
	return func(d *Driver) error {
		d.noFunctions.Store(false)
		return nil
	}
}

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
// closes it after the dlock Client. A nil rdb, or a nil pointer of a
// client type, is an error matching driver.ErrInvalid.
func New(rdb redis.UniversalClient, opts ...Option) (*Driver, error) {
	if isNil(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", driver.ErrInvalid)
	}
	d := &Driver{rdb: rdb, prefix: DefaultPrefix, loading: make(chan struct{}, 1)}
	d.noFunctions.Store(true) // scripts unless WithFunctions: see there why
	d.cluster, _ = rdb.(*redis.ClusterClient)
	if err := options.Apply(d, opts); err != nil {
		return nil, err
	}
	if err := d.checkAck(); err != nil {
		return nil, err
	}
	if d.cluster != nil {
		d.layout = newLayout(d.cluster)
	}
	return d, nil
}

// isNil also catches a typed nil pointer in the interface, which would
// otherwise only fail, with a panic, at the first command.
func isNil(rdb redis.UniversalClient) bool {
	if rdb == nil {
		return true
	}
	v := reflect.ValueOf(rdb)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Capabilities implements driver.Driver.
//
// Redis keeps expiry times in whole milliseconds and may count a key
// expired up to a millisecond early: ExpiryMargin covers that and the
// rounding of the TTL itself. go-redis does not abort a read in flight
// when its context is cancelled (and without ContextTimeoutEnabled it
// ignores deadlines as well), so the driver is not ContextAware. An
// uncontended acquisition through the queue is the plain one's commands
// in one call (enqueue.lua) and costs the server what the plain one does
// (docs/benchmarks.md), so Lock queues by default.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		TTLUnit:        time.Millisecond,
		MinTTL:         20 * time.Millisecond,
		ExpiryMargin:   2 * time.Millisecond,
		MaxBatch:       MaxBatch,
		ContextAware:   false,
		QueueByDefault: true,
	}
}

// CheckKey implements driver.KeyChecker. A key must not start with '}':
// wrapped in the {hash tag}, it would make the tag empty, and Redis
// Cluster would hash a lock's two keys to different slots.
func (d *Driver) CheckKey(key string) error {
	if strings.HasPrefix(key, "}") {
		return fmt.Errorf("%w: key %q starts with '}'", driver.ErrInvalid, key)
	}
	return nil
}

// checkLease rejects a Renew or Release request of a lease this driver
// cannot name: an unknown kind or an id checkID refuses.
func checkLease(k driver.Kind, id string) error {
	if err := k.Check(); err != nil {
		return err
	}
	return checkID(id)
}

// checkID rejects owner ids the lock value format cannot carry.
func checkID(id string) error {
	// '#' starts the queue's own members and counters (queue_lib.lua).
	if id == "" || strings.Contains(id, sep) || strings.HasPrefix(id, "#") {
		return fmt.Errorf("%w: owner id %q (must be non-empty, without %q, not starting with #)", driver.ErrInvalid, id, sep)
	}
	return nil
}

// checkTTL rejects TTLs Redis would refuse (PX takes a positive count of
// milliseconds).
func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: ttl %v below 1ms", driver.ErrInvalid, ttl)
	}
	return nil
}

func (d *Driver) lockKey(name string) string { return d.prefix + "{" + name + "}" }
func (d *Driver) lastKey(name string) string { return d.lockKey(name) + lastSuffix }

// lockAndLast returns lockKey(name) and lastKey(name) from one string: the
// first is the start of the second.
func (d *Driver) lockAndLast(name string) (lock, last string) {
	last = d.lastKey(name)
	return last[:len(last)-len(lastSuffix)], last
}
func (d *Driver) channel(name string) string { return d.lockKey(name) + channelSuffix }

// nameFromChannel inverts channel; ok is false for foreign channels.
func (d *Driver) nameFromChannel(ch string) (string, bool) {
	s, ok := strings.CutPrefix(ch, d.prefix+"{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(s, "}"+channelSuffix)
}

// ForceRelease implements driver.Inspector: it frees the lock whoever
// holds it, keeps its token on record (as a release does) and wakes
// waiters. The holder's own later release then answers NotHeld.
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	reply, err := d.run(ctx, forceReleaseScript, []string{d.lockKey(key), d.lastKey(key)}).Text()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	tok, err := parseToken(reply)
	if err != nil {
		return 0, true, fmt.Errorf("force release script: %w", err)
	}
	return tok, true, nil
}

// Close implements driver.Driver. It stops the reloads of a Cluster's
// layout, and closes the redis client only if the driver made it (Open);
// a client passed to New is the caller's to close.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.layout.close()
		if d.ownsClient {
			d.closeErr = d.rdb.Close()
		}
	})
	return d.closeErr
}

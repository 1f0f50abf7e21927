// Package redisonce is a once.Store in Redis: one hash per record,
// changed only by Lua scripts that compare fencing tokens in the server,
// and expired by Redis itself.
//
// Layout: the record of key K is the hash <prefix>K (default prefix
// "dlock:once:") with fields s (state: 1 in progress, 2 completed, 3
// failed), t (token, decimal), h (payload hash), r (result), and a PTTL
// that is the record's expiry. Every call is one script, one round trip.
//
// Records survive a restart only as far as Redis persistence allows: with
// appendonly yes and appendfsync always, every acknowledged change; with
// periodic snapshots or appendfsync everysec, a restart can forget recent
// completions, and the next delivery then runs the work again.
package redisonce

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/options"
	"github.com/dlockio/dlock/once"
	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is put before every key.
const DefaultPrefix = "dlock:once:"

var (
	//go:embed lib.lua
	libLua string
	//go:embed claim.lua
	claimLua string
	//go:embed finish.lua
	finishLua string
	//go:embed get.lua
	getLua string

	claimScript  = redis.NewScript(libLua + claimLua)
	finishScript = redis.NewScript(finishLua)
	getScript    = redis.NewScript(libLua + getLua)
)

// Store implements once.Store on a go-redis client.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ once.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store) error

// WithPrefix sets what is put before every key. Default DefaultPrefix.
func WithPrefix(p string) Option {
	return func(s *Store) error { s.prefix = p; return nil }
}

// New returns a Store on rdb, any go-redis client. Every script touches
// one key, so nothing stops a Cluster client, but the tests run on a
// single server only. The application keeps and closes rdb.
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", once.ErrInvalidArgument)
	}
	s := &Store{rdb: rdb, prefix: DefaultPrefix}
	if err := options.Apply(s, opts); err != nil {
		return nil, err
	}
	return s, nil
}

func check(ctx context.Context, key string, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", once.ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", once.ErrInvalidArgument)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl %v, below Redis's 1 ms", once.ErrInvalidArgument, ttl)
	}
	return nil
}

// Claim implements once.Store.
func (s *Store) Claim(ctx context.Context, key string, token uint64, hash []byte, ttl time.Duration) (once.Record, bool, error) {
	if err := check(ctx, key, ttl); err != nil {
		return once.Record{}, false, err
	}
	v, err := claimScript.Run(ctx, s.rdb, []string{s.prefix + key}, strconv.FormatUint(token, 10), hash, ttl.Milliseconds()).Slice()
	if err != nil {
		return once.Record{}, false, s.fail(ctx, "claim", key, err)
	}
	if len(v) != 2 {
		return once.Record{}, false, s.fail(ctx, "claim", key, fmt.Errorf("unexpected reply %v", v))
	}
	rec, err := parse(key, v[1])
	if err != nil {
		return once.Record{}, false, s.fail(ctx, "claim", key, err)
	}
	return rec, v[0] == int64(1), nil
}

// Complete implements once.Store.
func (s *Store) Complete(ctx context.Context, key string, token uint64, result []byte, ttl time.Duration) error {
	return s.finish(ctx, "complete", key, token, once.Completed, result, ttl)
}

// Fail implements once.Store.
func (s *Store) Fail(ctx context.Context, key string, token uint64, ttl time.Duration) error {
	return s.finish(ctx, "fail", key, token, once.Failed, nil, ttl)
}

func (s *Store) finish(ctx context.Context, op, key string, token uint64, to once.State, result []byte, ttl time.Duration) error {
	if err := check(ctx, key, ttl); err != nil {
		return err
	}
	n, err := finishScript.Run(ctx, s.rdb, []string{s.prefix + key},
		strconv.FormatUint(token, 10), int(to), result, ttl.Milliseconds()).Int()
	if err != nil {
		return s.fail(ctx, op, key, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: key %q, token %d", once.ErrClaimLost, key, token)
	}
	return nil
}

// Get implements once.Store.
func (s *Store) Get(ctx context.Context, key string) (once.Record, bool, error) {
	if err := check(ctx, key, time.Millisecond); err != nil {
		return once.Record{}, false, err
	}
	v, err := getScript.Run(ctx, s.rdb, []string{s.prefix + key}).Result()
	if errors.Is(err, redis.Nil) {
		return once.Record{}, false, nil
	}
	if err != nil {
		return once.Record{}, false, s.fail(ctx, "get", key, err)
	}
	rec, err := parse(key, v)
	if err != nil {
		return once.Record{}, false, s.fail(ctx, "get", key, err)
	}
	return rec, true, nil
}

// parse reads a record reply {state, token, hash, result, pttl}.
func parse(key string, v any) (once.Record, error) {
	f, ok := v.([]any)
	if !ok || len(f) != 5 {
		return once.Record{}, fmt.Errorf("unexpected record %v", v)
	}
	var str [4]string
	for i := range str {
		if str[i], ok = f[i].(string); !ok {
			return once.Record{}, fmt.Errorf("unexpected record field %d: %v", i, f[i])
		}
	}
	state, err1 := strconv.Atoi(str[0])
	token, err2 := strconv.ParseUint(str[1], 10, 64)
	pttl, ok := f[4].(int64)
	if err1 != nil || err2 != nil || !ok {
		return once.Record{}, fmt.Errorf("unexpected record %v", v)
	}
	return once.Record{
		Key:         key,
		State:       once.State(state),
		Token:       token,
		PayloadHash: []byte(str[2]),
		Result:      []byte(str[3]),
		ExpiresAt:   time.Now().Add(time.Duration(pttl) * time.Millisecond),
	}, nil
}

// fail classifies an error: the caller's ctx, or a backend failure
// (matching dlock.ErrBackend).
func (s *Store) fail(ctx context.Context, op, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("redisonce: %s %q: %w", op, key, ctx.Err())
	}
	return fmt.Errorf("redisonce: %s %q: %w: %w", op, key, dlock.ErrBackend, err)
}

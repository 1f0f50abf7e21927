package redisfence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lib.lua
	libLua string
	//go:embed set.lua
	setLua string
	//go:embed get.lua
	getLua string
	//go:embed hset.lua
	hsetLua string
	//go:embed incrby.lua
	incrbyLua string
	//go:embed del.lua
	delLua string
	//go:embed advance.lua
	advanceLua string
	//go:embed highest.lua
	highestLua string
)

// Scripts never change, so they are made once; a redis.Script holds only
// its source and hash.
var (
	setScript     = redis.NewScript(libLua + setLua)
	getScript     = redis.NewScript(libLua + getLua)
	hsetScript    = redis.NewScript(libLua + hsetLua)
	incrbyScript  = redis.NewScript(libLua + incrbyLua)
	delScript     = redis.NewScript(libLua + delLua)
	advanceScript = redis.NewScript(libLua + advanceLua)
	highestScript = redis.NewScript(highestLua)
)

// Client makes fenced writes through a go-redis client: *redis.Client,
// *redis.ClusterClient, *redis.Ring or anything else that runs scripts. It
// is safe for concurrent use and closes nothing.
type Client struct {
	rdb redis.Scripter
}

// New returns a Client writing through rdb.
func New(rdb redis.Scripter) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", dlock.ErrInvalidArgument)
	}
	return &Client{rdb: rdb}, nil
}

// Set sets key to value (formatted as go-redis formats arguments) with an
// expiry of ttl (0: none; rounded up to a millisecond) if tok is not lower
// than the highest token seen for key.
func (c *Client) Set(ctx context.Context, key string, tok fence.Token, value any, ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: negative expiry %v", dlock.ErrInvalidArgument, ttl)
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	_, err := c.run(ctx, setScript, "set", key, tok, value, int64(ms))
	return err
}

// Get returns key's value if tok is not lower than the highest token seen,
// and registers tok as seen: a holder that reads, computes and then writes
// (Set) is fenced from the read on, so an older holder cannot write between
// its read and its write. A missing key returns redis.Nil.
func (c *Client) Get(ctx context.Context, key string, tok fence.Token) (string, error) {
	v, err := c.run(ctx, getScript, "get", key, tok)
	if err != nil {
		return "", err
	}
	if v == nil {
		return "", redis.Nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redisfence: get %q: unexpected reply %T", key, v)
	}
	return s, nil
}

// HSet sets fields of the hash at key if tok is not lower than the highest
// token seen, and returns how many fields were new.
func (c *Client) HSet(ctx context.Context, key string, tok fence.Token, fields map[string]any) (int64, error) {
	if len(fields) == 0 {
		return 0, fmt.Errorf("%w: HSet needs at least one field", dlock.ErrInvalidArgument)
	}
	args := make([]any, 0, 2*len(fields))
	for f, v := range fields {
		args = append(args, f, v)
	}
	v, err := c.run(ctx, hsetScript, "hset", key, tok, args...)
	if err != nil {
		return 0, err
	}
	return asInt(key, v)
}

// IncrBy adds n to the integer at key if tok is not lower than the highest
// token seen, and returns the new value.
func (c *Client) IncrBy(ctx context.Context, key string, tok fence.Token, n int64) (int64, error) {
	v, err := c.run(ctx, incrbyScript, "incrby", key, tok, n)
	if err != nil {
		return 0, err
	}
	return asInt(key, v)
}

// Del deletes key if tok is not lower than the highest token seen, and
// reports whether it existed. The mark is kept.
func (c *Client) Del(ctx context.Context, key string, tok fence.Token) (bool, error) {
	v, err := c.run(ctx, delScript, "del", key, tok)
	if err != nil {
		return false, err
	}
	n, err := asInt(key, v)
	return n > 0, err
}

// Advance registers tok as seen for key without touching its data: after
// it, writes with lower tokens are refused. It fails like a write when a
// higher token was seen.
func (c *Client) Advance(ctx context.Context, key string, tok fence.Token) error {
	_, err := c.run(ctx, advanceScript, "advance", key, tok)
	return err
}

// Highest returns the highest token seen for key (0 if none), read without
// registering anything.
func (c *Client) Highest(ctx context.Context, key string) (fence.Token, error) {
	fk, err := FenceKey(key)
	if err != nil {
		return 0, err
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument)
	}
	s, err := highestScript.Run(ctx, c.rdb, []string{fk}).Text()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, c.fail(ctx, "highest", key, err)
	}
	return strconv.ParseUint(s, 10, 64)
}

// run runs script on key's fence key and key, and returns the value part
// of its {1, value} reply (nil when there is none), or a StaleTokenError
// for {0, highest}.
func (c *Client) run(ctx context.Context, script *redis.Script, op, key string, tok fence.Token, args ...any) (any, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument)
	}
	fk, err := FenceKey(key)
	if err != nil {
		return nil, err
	}
	argv := append([]any{strconv.FormatUint(tok, 10)}, args...)
	reply, err := script.Run(ctx, c.rdb, []string{fk, key}, argv...).Slice()
	if err != nil {
		return nil, c.fail(ctx, op, key, err)
	}
	if len(reply) == 0 {
		return nil, fmt.Errorf("redisfence: %s %q: empty reply", op, key)
	}
	if accepted, _ := reply[0].(int64); accepted == 1 {
		if len(reply) > 1 {
			return reply[1], nil
		}
		return nil, nil
	}
	var top string
	if len(reply) > 1 {
		top, _ = reply[1].(string)
	}
	highest, perr := strconv.ParseUint(top, 10, 64)
	if perr != nil {
		return nil, fmt.Errorf("redisfence: %s %q: the mark at %s is %q, not a token", op, key, fk, top)
	}
	return nil, fence.Stale(key, tok, highest)
}

// fail wraps a Redis error: it matches ctx.Err() when ctx ended (and its
// cause, when it has one of its own), and dlock.ErrBackend otherwise (a
// server-side script error such as WRONGTYPE included).
func (c *Client) fail(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if cause := context.Cause(ctx); cause != cerr {
			return fmt.Errorf("redisfence: %s %q: %w: %w", op, key, cerr, cause)
		}
		return fmt.Errorf("redisfence: %s %q: %w", op, key, cerr)
	}
	return fmt.Errorf("%w: redisfence: %s %q: %w", dlock.ErrBackend, op, key, err)
}

func asInt(key string, v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("redisfence: %q: unexpected reply %T", key, v)
	}
	return n, nil
}

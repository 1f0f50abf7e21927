package redisdriver

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Inspect implements driver.Inspector. The token is the holder's, read
// from the lock value.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	k := d.lockKey(key)
	var get *redis.StringCmd
	var pttl *redis.DurationCmd
	// Plain reads in one pipeline, a moment apart (see readQueue for why
	// not MULTI or a script): a key released between them has no TTL left.
	_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k)
		pttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		d.layout.noteErr(err)
		return driver.LockInfo{}, false, err
	}
	if errors.Is(get.Err(), redis.Nil) || pttl.Val() == -2 {
		return driver.LockInfo{}, false, nil
	}
	info := driver.LockInfo{Key: key, TTL: pttl.Val()}
	if err := parseValue(get.Val(), &info); err != nil {
		return driver.LockInfo{}, false, err
	}
	return info, true, nil
}

// List implements driver.Inspector. It scans every master in Cluster mode.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	match := escapeGlob(d.prefix+"{"+prefix) + "*}"
	var mu sync.Mutex
	var names []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.ScanType(ctx, 0, match, 1000, "string").Iterator()
		for it.Next(ctx) {
			name, ok := strings.CutPrefix(it.Val(), d.prefix+"{")
			if !ok || !strings.HasSuffix(name, "}") {
				continue
			}
			mu.Lock()
			names = append(names, strings.TrimSuffix(name, "}"))
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if d.cluster != nil {
		err = d.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.rdb)
	}
	if err != nil {
		return nil, err
	}
	infos := make([]driver.LockInfo, 0, len(names))
	for _, n := range names {
		info, ok, err := d.Inspect(ctx, n)
		if err != nil {
			return nil, err
		}
		if ok { // skip locks released since the scan
			infos = append(infos, info)
		}
	}
	return infos, nil
}

func escapeGlob(s string) string {
	// Byte by byte: names are bytes, and ranging over runes would turn a
	// byte that is not UTF-8 into U+FFFD, which matches nothing stored.
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readQueue reads what InspectQueue shows of the name of lock key k: {
// lock value or nil, its PTTL, the server's now in ms, waiter ids in order,
// { member, expiry ms, ... } of P{N}:e, { field, value, ... } of P{N}:d }
// (queue_lib.lua). Plain reads in one pipeline: no Lua and no MULTI, so
// that a user allowed only to read dlock's keys (and TIME) can inspect,
// inspecting changes nothing, and it works with memory full (Redis refuses
// every command inside MULTI then). The reads are a moment apart, so a
// grant between them may show the granted waiter nowhere, or its place
// without a record; InspectQueue skips what does not add up. Expired
// entries are still on record, and skipped too: what they held up is
// granted at the next call that touches the name, as always.
func (d *Driver) readQueue(ctx context.Context, k string) ([]any, error) {
	var (
		now  *redis.TimeCmd
		get  *redis.StringCmd
		pttl *redis.DurationCmd
		w    *redis.StringSliceCmd
		e    *redis.ZSliceCmd
		data *redis.MapStringStringCmd
	)
	_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		get = p.Get(ctx, k)
		pttl = p.PTTL(ctx, k)
		w = p.LRange(ctx, k+":w", 0, -1)
		e = p.ZRangeWithScores(ctx, k+":e", 0, -1)
		data = p.HGetAll(ctx, k+":d")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		d.layout.noteErr(err)
		return nil, err
	}
	var v any
	if get.Err() == nil {
		v = get.Val()
	}
	ids := make([]any, 0, len(w.Val()))
	for _, id := range w.Val() {
		ids = append(ids, id)
	}
	exps := make([]any, 0, 2*len(e.Val()))
	for _, z := range e.Val() {
		if m, ok := z.Member.(string); ok && !math.IsInf(z.Score, 0) {
			exps = append(exps, m, strconv.FormatInt(int64(z.Score), 10))
		}
	}
	fields := make([]any, 0, 2*len(data.Val()))
	for f, val := range data.Val() {
		fields = append(fields, f, val)
	}
	ms := pttl.Val().Milliseconds()
	if pttl.Val() < 0 {
		ms = int64(pttl.Val()) // -2: no key (released between the reads); -1: no expiry
	}
	return []any{v, ms, now.Val().UnixMilli(), ids, exps, fields}, nil
}

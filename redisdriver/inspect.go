package redisdriver

import (
	"context"
	"errors"
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
	// MULTI/EXEC so that value and TTL are read at the same moment.
	_, err := d.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, k)
		pttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return driver.LockInfo{}, false, err
	}
	if errors.Is(get.Err(), redis.Nil) {
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

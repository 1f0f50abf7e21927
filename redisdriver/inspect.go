package redisdriver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Inspect implements driver.Inspector.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	v, err := inspectScript.Run(ctx, d.rdb, []string{d.lockKey(key)}).Slice()
	if err != nil {
		return driver.LockInfo{}, false, err
	}
	if len(v) == 0 {
		return driver.LockInfo{}, false, fmt.Errorf("inspect script: empty reply")
	}
	pttl, _ := v[0].(int64)
	if pttl == -2 { // no such key: free
		return driver.LockInfo{}, false, nil
	}
	info := driver.LockInfo{Key: key, TTL: time.Duration(pttl) * time.Millisecond}
	for i := 1; i+1 < len(v); i += 2 {
		f, _ := v[i].(string)
		val, _ := v[i+1].(string)
		switch f {
		case "token":
			info.Token, _ = strconv.ParseUint(val, 10, 64)
		case "host":
			info.Owner.Host = val
		case "pid":
			info.Owner.PID, _ = strconv.Atoi(val)
		case "meta":
			info.Owner.Meta = val
		case "since":
			ms, _ := strconv.ParseInt(val, 10, 64)
			info.Since = time.UnixMilli(ms)
		}
	}
	return info, true, nil
}

// List implements driver.Inspector. It scans every master in Cluster mode.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	match := escapeGlob(d.prefix+"{"+prefix) + "*}"
	var mu sync.Mutex
	var names []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.ScanType(ctx, 0, match, 1000, "hash").Iterator()
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
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

package redisdriver

import (
	"context"
	"strings"
	"sync"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

var _ driver.QueueLister = (*Driver)(nil)

// ListQueues implements driver.QueueLister. It finds the names by their
// queue marker P{N}:q (queue_lib.lua), which exists while a name has
// queued leases (and a little longer: see queued), with SCAN on every master in Cluster mode, and then
// reads each with InspectQueue, so each name is as consistent as
// InspectQueue makes it. The work is one SCAN pass plus one script call
// per queued name under prefix; ctx bounds all of it.
func (d *Driver) ListQueues(ctx context.Context, prefix string) ([]driver.QueueInfo, error) {
	tail := "}" + queueSuffix
	match := escapeGlob(d.prefix+"{"+prefix) + "*" + escapeGlob(tail)
	var mu sync.Mutex
	seen := make(map[string]bool) // SCAN may return a key more than once
	var names []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.ScanType(ctx, 0, match, 1000, "string").Iterator()
		for it.Next(ctx) {
			name, ok := strings.CutPrefix(it.Val(), d.prefix+"{")
			if !ok || !strings.HasSuffix(name, tail) {
				continue
			}
			name = strings.TrimSuffix(name, tail)
			mu.Lock()
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
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
	infos := make([]driver.QueueInfo, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, ok, err := d.InspectQueue(ctx, n)
		if err != nil {
			return nil, err
		}
		if ok && queued(info) { // skip names emptied since the scan
			infos = append(infos, info)
		}
	}
	return infos, nil
}

// queued reports whether info has a shared or permit holder or a waiter:
// what makes a name ListQueues'.
func queued(info driver.QueueInfo) bool {
	if len(info.Waiters) > 0 {
		return true
	}
	for _, h := range info.Holders {
		if h.Mode != driver.ModeExclusive {
			return true
		}
	}
	return false
}

package memdriver

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// OpListQueues names ListQueues for fault injection (see Fault).
const OpListQueues = "list-queues"

var _ driver.QueueLister = (*Driver)(nil)

// ListQueues implements driver.QueueLister: every name under prefix with a
// shared or permit holder or a waiter, as of one instant (the store's
// lock is held throughout), each settled as InspectQueue settles it.
func (d *Driver) ListQueues(ctx context.Context, prefix string) ([]driver.QueueInfo, error) {
	return run(ctx, d, OpListQueues, func(s *store, now time.Time) ([]driver.QueueInfo, error) {
		infos := []driver.QueueInfo{}
		for key := range s.queues {
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			// settle may delete the entry; deleting the current key while
			// ranging over a map is allowed.
			q := s.settle(key, now)
			if q == nil {
				continue
			}
			infos = append(infos, s.queueInfo(key, q, now))
		}
		slices.SortFunc(infos, func(a, b driver.QueueInfo) int { return strings.Compare(a.Key, b.Key) })
		return infos, nil
	})
}

// queueInfo is the QueueInfo of a settled, non-empty queue q of key,
// shaped as InspectQueue's.
func (s *store) queueInfo(key string, q *queueState, now time.Time) driver.QueueInfo {
	info := driver.QueueInfo{Key: key, Holders: []driver.HolderInfo{}, Waiters: []driver.WaiterInfo{}}
	if l, ok := s.live(key, now); ok {
		info.Holders = append(info.Holders, driver.HolderInfo{ID: l.id, Mode: driver.ModeExclusive,
			Token: l.token, Owner: l.owner, TTL: l.expires.Sub(now)})
	}
	for id, h := range q.holders {
		info.Holders = append(info.Holders, driver.HolderInfo{ID: id, Mode: h.mode,
			Token: h.token, Owner: h.owner, TTL: h.expires.Sub(now)})
	}
	for _, w := range q.waiters {
		info.Waiters = append(info.Waiters, driver.WaiterInfo{ID: w.id, Mode: w.mode,
			Limit: w.limit, Owner: w.owner, TTL: w.expires.Sub(now)})
	}
	slices.SortFunc(info.Holders, func(a, b driver.HolderInfo) int {
		return cmp.Or(cmp.Compare(a.Token, b.Token), strings.Compare(a.ID, b.ID))
	})
	return info
}

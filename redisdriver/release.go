package redisdriver

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
)

// Release implements driver.Driver: one release.lua call per Cluster slot
// (one in total otherwise), sent together in one pipeline when there are
// several. The script publishes
// each release that leaves a name free, for plain Lock's waiters; they hear
// of it only after it happened.
func (d *Driver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	for _, r := range reqs {
		if err := checkLease(r.Kind, r.ID); err != nil {
			return nil, err
		}
	}
	d.waiters.released(reqs)
	results := make([]driver.ReleaseResult, len(reqs))
	err := d.runBatch(ctx, batch{
		n:        len(reqs),
		key:      func(i int) string { return reqs[i].Key },
		isLock:   func(i int) bool { return reqs[i].Kind == driver.KindLock },
		lockCall: func(idx []int) *call { return d.lockReleaseCall(reqs, idx) },
		queueCall: func(idx []int) *call {
			// queue_release.lua publishes itself, only for names it leaves
			// free: the common release there is a hand-off, which wakes
			// its waiter through the inbox.
			cl := &call{s: queueReleaseScript, keys: make([]string, len(idx)), args: make([]any, 0, 2*len(idx))}
			for i, ri := range idx {
				cl.keys[i] = d.lockKey(reqs[ri].Key)
				cl.args = append(cl.args, reqs[ri].ID, leaseTag(reqs[ri].Kind))
			}
			return cl
		},
	}, func(i int, digit byte) error {
		switch int(digit - '0') {
		case replyReleased:
			results[i] = driver.Released
		case replyAlreadyReleased:
			results[i] = driver.AlreadyReleased
		case replyNotHeld:
			results[i] = driver.NotHeld
		default:
			return fmt.Errorf("unexpected answer %q", digit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// lockReleaseCall is the release.lua call of the exclusive locks reqs[i]
// for i in idx, all in one slot.
//
// A request's Settled id goes with it: the script keeps no record of that
// earlier release for its retry (keep_release in lib.lua), as no retry can
// come.
func (d *Driver) lockReleaseCall(reqs []driver.ReleaseRequest, idx []int) *call {
	cl := &call{s: releaseScript, keys: make([]string, 0, 2*len(idx)), args: make([]any, 0, 2*len(idx))}
	for _, ri := range idx {
		lock, last := d.lockAndLast(reqs[ri].Key)
		cl.keys = append(cl.keys, lock, last)
		settled := ""
		if s := reqs[ri].Settled; s != "" {
			settled = idPrefix(s)
		}
		cl.args = append(cl.args, idPrefix(reqs[ri].ID), settled)
	}
	return cl
}

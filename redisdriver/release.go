package redisdriver

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Release implements driver.Driver: one release.lua call per Cluster slot
// (one in total otherwise), all sent in one pipeline.
//
// On one server the PUBLISHes that wake waiters go out as plain commands
// right after the script, in the same pipeline: made from inside the
// script they cost Redis several times as much (docs/benchmarks.md). The
// commands of a pipeline run in order on one connection, so waiters still
// hear of a release only after it happened. A Cluster client may route a
// PUBLISH to another node, where it could overtake the script, so in
// Cluster mode the script publishes. On one server every key of the batch
// is published, released or not (the results are not known when the
// pipeline is sent); a waiter woken for nothing finds the lock held and
// waits again.
func (d *Driver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	for _, r := range reqs {
		if err := checkKind(r.Kind); err != nil {
			return nil, err
		}
		if err := checkID(r.ID); err != nil {
			return nil, err
		}
	}
	publishInScript := "0"
	if d.cluster != nil {
		publishInScript = "1"
	}
	results := make([]driver.ReleaseResult, len(reqs))
	err := d.runBatch(ctx, batch{
		n:        len(reqs),
		key:      func(i int) string { return reqs[i].Key },
		isLock:   func(i int) bool { return reqs[i].Kind == driver.KindLock },
		lockCall: func(idx []int) *call { return d.lockReleaseCall(ctx, reqs, idx, publishInScript) },
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
func (d *Driver) lockReleaseCall(ctx context.Context, reqs []driver.ReleaseRequest, idx []int, publishInScript string) *call {
	cl := &call{s: releaseScript, keys: make([]string, 0, 2*len(idx)), args: make([]any, 1, 1+len(idx))}
	cl.args[0] = publishInScript
	var channels []string
	seen := make(map[string]bool, len(idx))
	for _, ri := range idx {
		k := reqs[ri].Key
		cl.keys = append(cl.keys, d.lockKey(k), d.lastKey(k))
		cl.args = append(cl.args, idPrefix(reqs[ri].ID))
		if !seen[k] {
			seen[k] = true
			channels = append(channels, d.channel(k))
		}
	}
	if d.cluster == nil {
		cl.after = func(p redis.Pipeliner) {
			for _, ch := range channels {
				p.Publish(ctx, ch, "")
			}
		}
	}
	return cl
}

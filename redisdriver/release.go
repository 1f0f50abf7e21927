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
	type part struct {
		cl  *call
		idx []int
	}
	var parts []part
	for _, g := range d.groupBySlot(len(reqs), func(i int) string { return reqs[i].Key }) {
		var locks, queued []int
		for _, ri := range g {
			if reqs[ri].Kind == driver.KindLock {
				locks = append(locks, ri)
			} else {
				queued = append(queued, ri)
			}
		}
		if len(locks) > 0 {
			parts = append(parts, part{d.lockReleaseCall(ctx, reqs, locks, publishInScript), locks})
		}
		if len(queued) > 0 {
			// queue_release.lua publishes itself, only for names it leaves
			// free: the common release there is a hand-off, which wakes
			// its waiter through the inbox.
			cl := &call{s: queueReleaseScript, keys: make([]string, len(queued)), args: make([]any, 0, 2*len(queued))}
			for i, ri := range queued {
				cl.keys[i] = d.lockKey(reqs[ri].Key)
				cl.args = append(cl.args, reqs[ri].ID, leaseTag(reqs[ri].Kind))
			}
			parts = append(parts, part{cl, queued})
		}
	}
	calls := make([]*call, len(parts))
	for i, p := range parts {
		calls[i] = p.cl
	}
	if err := runCalls(ctx, d.rdb.Pipeline(), calls); err != nil {
		return nil, err
	}
	results := make([]driver.ReleaseResult, len(reqs))
	for _, p := range parts {
		codes, err := replyDigits(p.cl, len(p.idx))
		if err != nil {
			return nil, err
		}
		for i, ri := range p.idx {
			switch int(codes[i] - '0') {
			case replyReleased:
				results[ri] = driver.Released
			case replyAlreadyReleased:
				results[ri] = driver.AlreadyReleased
			case replyNotHeld:
				results[ri] = driver.NotHeld
			default:
				return nil, fmt.Errorf("%s script: unexpected answer %q", p.cl.s.name, codes[i])
			}
		}
	}
	return results, nil
}

// replyDigits returns the reply of a batch script: one digit per request.
func replyDigits(cl *call, n int) (string, error) {
	s, err := cl.reply.Text()
	if err != nil {
		return "", err
	}
	if len(s) != n {
		return "", fmt.Errorf("%s script: %d answers for %d keys", cl.s.name, len(s), n)
	}
	return s, nil
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

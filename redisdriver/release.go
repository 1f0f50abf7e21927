package redisdriver

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Release implements driver.Driver.
//
// On one server the PUBLISH that wakes waiters goes out as a plain command
// right after the script, in the same pipeline: made from inside the script
// it costs Redis several times as much (docs/benchmarks.md). The commands of
// a pipeline run in order on one connection, so waiters still hear of a
// release only after it happened. A Cluster client may route the PUBLISH to
// another node, where it could overtake the script, so in Cluster mode the
// script publishes.
func (d *Driver) Release(ctx context.Context, req driver.ReleaseRequest) (driver.ReleaseResult, error) {
	keys := []string{d.lockKey(req.Key), d.lastKey(req.Key)}
	var n int64
	var err error
	if d.cluster != nil {
		n, err = releaseScript.Run(ctx, d.rdb, keys, idPrefix(req.ID), d.channel(req.Key)).Int64()
	} else {
		n, err = d.releaseThenPublish(ctx, keys, idPrefix(req.ID), d.channel(req.Key))
	}
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return driver.Released, nil
	case 2:
		return driver.AlreadyReleased, nil
	case 0:
		return driver.NotHeld, nil
	}
	return 0, fmt.Errorf("release script: unexpected reply %d", n)
}

// releaseThenPublish pipelines the release script (told not to publish) and
// a PUBLISH. A release that was refused publishes too; waiters woken by it
// find the lock held and wait again.
func (d *Driver) releaseThenPublish(ctx context.Context, keys []string, id, channel string) (int64, error) {
	run := func(script func(redis.Pipeliner) *redis.Cmd) (int64, error) {
		var cmd *redis.Cmd
		if _, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = script(p)
			p.Publish(ctx, channel, "")
			return nil
		}); err != nil {
			return 0, err
		}
		return cmd.Int64()
	}
	n, err := run(func(p redis.Pipeliner) *redis.Cmd { return releaseScript.EvalSha(ctx, p, keys, id, "") })
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Not cached on this server yet (first use, restart, failover).
		n, err = run(func(p redis.Pipeliner) *redis.Cmd { return releaseScript.Eval(ctx, p, keys, id, "") })
	}
	return n, err
}

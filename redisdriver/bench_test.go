package redisdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRedisTime reports the server's own time (INFO commandstats,
// usec summed over the commands the driver sends) per acquisition, per
// release and per cycle, for names acquired before, uncontended:
//
//	go test -run '^$' -bench RedisTime -benchtime 20000x ./redisdriver/
//
// Commands run inside a script are part of the script's time (and are
// counted under their own names as well, so only the commands sent are
// summed). Redis' per-command dispatch is not in commandstats.
func BenchmarkRedisTime(b *testing.B) {
	d, rdb := benchDriver(b)
	ctx := context.Background()
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprint("bench-", i)
	}
	acquire := func() {
		for _, n := range names {
			if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: n, ID: "a", TTL: time.Minute}); err != nil || !res.Acquired {
				b.Fatal(res, err)
			}
		}
	}
	release := func() {
		for _, n := range names {
			if res, err := d.Release(ctx, []driver.ReleaseRequest{{Key: n, ID: "a"}}); err != nil || res[0] != driver.Released {
				b.Fatal(res, err)
			}
		}
	}
	sent := func(cmds ...string) float64 { return takeUsec(b, rdb, cmds...) }
	acquire() // a steady state: scripts cached, every name used before
	release()
	sent()
	b.ResetTimer()
	acquire()
	acq := sent("fcall", "evalsha", "eval")
	release()
	rel := sent("fcall", "evalsha", "eval", "publish")
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(acq/n, "redis-us/acquire")
	b.ReportMetric(rel/n, "redis-us/release")
	b.ReportMetric((acq+rel)/n, "redis-us/cycle")
}

// benchDriver returns a Driver with opts on a redis-server of the
// benchmark's own, and the go-redis client under it.
func benchDriver(b *testing.B, opts ...Option) (*Driver, *redis.Client) {
	b.Helper()
	rdb := redisserver.Start(b).Client(b)
	d, err := New(rdb, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return d, rdb
}

// BenchmarkRedisTimeRenewBatch measures the server time of one Renew call
// of MaxBatch leases: the longest a renewal script keeps every other client
// of the server waiting (the figure MaxBatch's comment points to, in
// docs/benchmarks.md).
func BenchmarkRedisTimeRenewBatch(b *testing.B) {
	d, rdb := benchDriver(b)
	ctx := context.Background()
	reqs := make([]driver.RenewRequest, MaxBatch)
	for i := range reqs {
		reqs[i] = driver.RenewRequest{Key: fmt.Sprint("batch-", i), ID: "a", TTL: time.Minute}
		if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: reqs[i].Key, ID: "a", TTL: time.Minute}); err != nil || !res.Acquired {
			b.Fatal(res, err)
		}
	}
	renew := func() {
		held, err := d.Renew(ctx, reqs)
		if err != nil || len(held) != len(reqs) || !held[0] || !held[len(held)-1] {
			b.Fatal(len(held), err)
		}
	}
	renew() // scripts cached
	takeUsec(b, rdb)
	b.ResetTimer()
	for range b.N {
		renew()
	}
	b.StopTimer()
	b.ReportMetric(takeUsec(b, rdb, "fcall", "evalsha", "eval")/float64(b.N), "redis-us/batch")
}

package redisdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
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
	srv := redisserver.Start(b)
	rdb := srv.Client(b)
	d, err := New(rdb)
	if err != nil {
		b.Fatal(err)
	}
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

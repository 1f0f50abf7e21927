package redisdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// BenchmarkRedisTimeAcquireAll reports the server's time per AcquireAll of
// n keys (names acquired before, uncontended), next to n single Acquires
// of the same names, as BenchmarkRedisTime measures it:
//
//	go test -run '^$' -bench RedisTimeAcquireAll -benchtime 5000x ./redisdriver/
func BenchmarkRedisTimeAcquireAll(b *testing.B) {
	for _, n := range []int{2, 4, 8} {
		b.Run(fmt.Sprint("keys=", n), func(b *testing.B) {
			d, rdb := benchDriver(b)
			ctx := context.Background()
			sets := make([][]driver.AcquireRequest, b.N)
			for i := range sets {
				for k := range n {
					sets[i] = append(sets[i], driver.AcquireRequest{Key: fmt.Sprintf("bench-%d-%d", i, k), ID: "a", TTL: time.Minute})
				}
			}
			releaseAll := func() {
				for _, reqs := range sets {
					rel := make([]driver.ReleaseRequest, len(reqs))
					for i, r := range reqs {
						rel[i] = driver.ReleaseRequest{Key: r.Key, ID: r.ID}
					}
					if _, err := d.Release(ctx, rel); err != nil {
						b.Fatal(err)
					}
				}
			}
			scriptUsec := func() float64 {
				stats := commandStats(b, rdb)
				if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				return stats["fcall"].usec + stats["evalsha"].usec + stats["eval"].usec
			}
			for _, reqs := range sets { // a steady state: scripts cached, names used before
				if res, err := d.AcquireAll(ctx, reqs); err != nil || !res.Acquired {
					b.Fatal(res, err)
				}
			}
			releaseAll()
			scriptUsec()
			b.ResetTimer()
			for _, reqs := range sets {
				if res, err := d.AcquireAll(ctx, reqs); err != nil || !res.Acquired {
					b.Fatal(res, err)
				}
			}
			all := scriptUsec()
			b.StopTimer()
			releaseAll()
			scriptUsec()
			for _, reqs := range sets {
				for _, r := range reqs {
					if res, err := d.Acquire(ctx, r); err != nil || !res.Acquired {
						b.Fatal(res, err)
					}
				}
			}
			one := scriptUsec()
			releaseAll()
			b.ReportMetric(all/float64(b.N), "redis-us/acquire-all")
			b.ReportMetric(one/float64(b.N), "redis-us/n-acquires")
		})
	}
}

//go:build unix

package dlockprom_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// pairBlock is how many cycles one block of BenchmarkMetricsCostPaired
// runs (about 0.15 s): longer than the observer queue's 100 ms batching,
// so that blocks see its batches as a steady load does.
const pairBlock = 2000

// BenchmarkMetricsCostPaired measures the collector's cost as a paired
// comparison, for machines too noisy for separate runs: blocks of
// pairBlock serial cycles on one redis-server, without and with the
// collector in turn (ABBA order), so both see the same machine noise
// within a fraction of a second. Each block uses a fresh Client (on a warm
// connection) and its timing includes Close, which delivers the block's
// last events: a block pays for its own events, not for its neighbour's.
// It reports the median over blocks of wall time and of process CPU time
// (user+sys, every goroutine) per cycle for each variant, and the
// overheads in percent. b.N counts pairs of blocks. With DLOCK_BENCH_AA=1
// neither variant has the collector: the overheads it reports are then
// the noise floor of the comparison. With DLOCK_BENCH_NOP=1 the second
// variant has an Observer that does nothing instead of the collector: the
// share of the observer queue alone.
func BenchmarkMetricsCostPaired(b *testing.B) {
	for _, w := range []string{"trylock", "lock"} {
		b.Run(w, func(b *testing.B) {
			srv := redisserver.Start(b)
			rdb := [2]*redis.Client{redisserver.NewClient(b, srv.Addr()), redisserver.NewClient(b, srv.Addr())}
			aa, nop := os.Getenv("DLOCK_BENCH_AA") != "", os.Getenv("DLOCK_BENCH_NOP") != ""
			// One collector for the process, as an application has: its
			// series are made once, not per block.
			col, err := dlockprom.New()
			if err != nil {
				b.Fatal(err)
			}
			var wall, cpu [2][]float64
			block := func(i int, record bool) {
				drv, err := redisdriver.New(rdb[i])
				if err != nil {
					b.Fatal(err)
				}
				var opts []dlock.Option
				switch {
				case i == 0 || aa:
				case nop:
					opts = append(opts, dlock.WithObserver(dlock.BaseObserver{}))
				default:
					opts = append(opts, dlock.WithObserver(col))
				}
				c, err := dlock.New(drv, opts...)
				if err != nil {
					b.Fatal(err)
				}
				lock := c.TryLock
				if w == "lock" {
					lock = c.Lock
				}
				t0, c0 := time.Now(), cpuTime()
				for range pairBlock {
					benchCycle(b, lock, "bench")
				}
				_ = c.Close()
				if record {
					wall[i] = append(wall[i], float64(time.Since(t0).Nanoseconds())/pairBlock)
					cpu[i] = append(cpu[i], float64((cpuTime()-c0).Nanoseconds())/pairBlock)
				}
			}
			block(0, false) // warm both connections
			block(1, false)
			round := 0
			for b.Loop() {
				first := round % 2
				block(first, true)
				block(1-first, true)
				round++
			}
			med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
			b.ReportMetric(med(wall[0]), "none-ns/cycle")
			b.ReportMetric(med(wall[1]), "collector-ns/cycle")
			b.ReportMetric(100*(med(wall[1])/med(wall[0])-1), "wall-overhead-%")
			b.ReportMetric(med(cpu[0]), "none-cpu-ns/cycle")
			b.ReportMetric(med(cpu[1]), "collector-cpu-ns/cycle")
			b.ReportMetric(100*(med(cpu[1])/med(cpu[0])-1), "cpu-overhead-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}

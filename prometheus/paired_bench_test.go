//go:build unix

package dlockprom_test

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/redistest"
	"github.com/dlockio/dlock/redisdriver"
)

// pairBlock is how many cycles one block of BenchmarkMetricsCostPaired runs
// on one Client before switching to the other.
const pairBlock = 200

// BenchmarkMetricsCostPaired measures the collector's cost as a paired
// comparison, for machines too noisy for separate runs: two Clients on one
// redis-server, one with the collector and one without, run blocks of
// pairBlock serial TryLock+Unlock cycles in turn (ABBA order), so both see
// the same machine noise within milliseconds. It reports the median over
// blocks of wall time and of process CPU time (user+sys, the observer's
// goroutine included) per cycle, for each Client, and the overheads in
// percent. b.N counts pairs of blocks. With DLOCK_BENCH_AA=1 neither
// Client has the collector: the overheads it reports then are the noise
// floor of the comparison.
func BenchmarkMetricsCostPaired(b *testing.B) {
	for _, w := range []string{"trylock", "lock"} {
		b.Run(w, func(b *testing.B) {
			srv := redistest.Start(b)
			clients := [2]*dlock.Client{}
			for i := range clients {
				drv, err := redisdriver.New(redistest.NewClient(b, srv.Addr()))
				if err != nil {
					b.Fatal(err)
				}
				clients[i] = benchClient(b, drv, i == 1 && os.Getenv("DLOCK_BENCH_AA") == "")
			}
			var wall, cpu [2][]float64
			block := func(i int) {
				lock := clients[i].TryLock
				if w == "lock" {
					lock = clients[i].Lock
				}
				t0, c0 := time.Now(), cpuTime()
				for range pairBlock {
					benchCycle(b, lock, "bench")
				}
				wall[i] = append(wall[i], float64(time.Since(t0).Nanoseconds())/pairBlock)
				cpu[i] = append(cpu[i], float64((cpuTime()-c0).Nanoseconds())/pairBlock)
			}
			for range pairBlock { // warm both connections and the collector's series
				benchCycle(b, clients[0].TryLock, "bench")
				benchCycle(b, clients[1].TryLock, "bench")
			}
			round := 0
			for b.Loop() {
				if round%2 == 0 {
					block(0)
					block(1)
				} else {
					block(1)
					block(0)
				}
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

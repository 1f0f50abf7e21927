package etcddriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	"github.com/dlockio/dlock/internal/testkit/probe"
)

// BenchmarkFairVersusPlain measures what WithFIFO costs an uncontended
// Lock+Unlock on etcd against the plain lock: blocks of each path, in
// alternating order, with each path's time and etcd RPCs per cycle.
func BenchmarkFairVersusPlain(b *testing.B) {
	const block = 50
	m := etcdserver.Start(b)
	cli, rc := countingClient(b, m.Addr())
	d, err := New(cli, WithPrefix("bench/"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	c, err := dlock.New(d)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	paths := [2][]dlock.LockOption{{dlock.WithoutFIFO()}, {dlock.WithFIFO()}}
	var wall [2]time.Duration
	var rpcs [2]int
	run := func(p int) {
		rc.take()
		start := time.Now()
		for range block {
			l, err := c.Lock(ctx, "versus", paths[p]...)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		wall[p] += time.Since(start)
		for _, n := range rc.take() {
			rpcs[p] += n
		}
	}
	rounds := probe.Versus(b, run, func() { wall, rpcs = [2]time.Duration{}, [2]int{} })
	cycles := float64(rounds * block)
	b.ReportMetric(float64(wall[0].Microseconds())/cycles, "plain-µs/cycle")
	b.ReportMetric(float64(wall[1].Microseconds())/cycles, "fifo-µs/cycle")
	b.ReportMetric(float64(rpcs[0])/cycles, "plain-rpcs/cycle")
	b.ReportMetric(float64(rpcs[1])/cycles, "fifo-rpcs/cycle")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "fifo/plain-time")
}

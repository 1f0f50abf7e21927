//go:build unix

package dlockprom_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/memdriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkMetricsCost is what the collector adds to a lock cycle on a
// loopback redis-server: each workload without and with it, one after the
// other, so that with -count N the two alternate N times on the same
// machine noise. serial: one goroutine, TryLock+Unlock of one key;
// serial-lock: the same with Lock (free key, no wait); uncontended: 8
// goroutines on one Client, a distinct key each. Besides ns/op it reports
// cpu-ns/op: the benchmark process's CPU time (user+sys, every goroutine,
// the observer's included) per cycle, which a busy machine disturbs less
// than wall time.
func BenchmarkMetricsCost(b *testing.B) {
	srv := redisserver.Start(b)
	runWorkloads(b, func(b *testing.B, withMetrics bool) *dlock.Client {
		drv, err := redisdriver.New(redisserver.NewClient(b, srv.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		return benchClient(b, drv, withMetrics)
	})
}

// BenchmarkMetricsCostInMemory is the same on the in-memory store: with no
// network in the cycle, the difference is the whole cost of the collector
// and the observer queue.
func BenchmarkMetricsCostInMemory(b *testing.B) {
	runWorkloads(b, func(b *testing.B, withMetrics bool) *dlock.Client {
		return benchClient(b, memdriver.New(), withMetrics)
	})
}

func runWorkloads(b *testing.B, newClient func(*testing.B, bool) *dlock.Client) {
	for _, w := range []string{"serial", "serial-lock", "uncontended"} {
		for _, withMetrics := range []bool{false, true} {
			name := w + "/none"
			if withMetrics {
				name = w + "/collector"
			}
			b.Run(name, func(b *testing.B) {
				c := newClient(b, withMetrics)
				b.ReportAllocs()
				cpu0 := cpuTime()
				switch w {
				case "serial":
					for b.Loop() {
						benchCycle(b, c.TryLock, "bench")
					}
				case "serial-lock":
					for b.Loop() {
						benchCycle(b, c.Lock, "bench")
					}
				case "uncontended":
					var next atomic.Int64
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						key := "bench:" + strconv.FormatInt(next.Add(1), 10)
						for pb.Next() {
							benchCycle(b, c.TryLock, key)
						}
					})
				}
				_ = c.Close() // the observer's last batch is part of the cost
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchClient(b *testing.B, drv driver.Driver, withMetrics bool) *dlock.Client {
	var opts []dlock.Option
	if withMetrics {
		col, err := dlockprom.New()
		if err != nil {
			b.Fatal(err)
		}
		prometheus.NewRegistry().MustRegister(col)
		opts = append(opts, dlock.WithObserver(col))
	}
	c, err := dlock.New(drv, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func benchCycle(b *testing.B, lock func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error), key string) {
	ctx := context.Background()
	l, err := lock(ctx, key)
	if err == nil {
		err = l.Unlock(ctx)
	}
	if err != nil {
		b.Error(err)
	}
}

package dlockprom_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Register the collector, install it on the Client, and serve the registry
// (promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) on /metrics).
func Example() {
	metrics, err := dlockprom.New()
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	locker, err := dlock.New(memdriver.New(), dlock.WithObserver(metrics)) // redisdriver.Open(url, ...) in production
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lease, err := locker.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	_ = lease.Unlock(ctx)
	_ = locker.Close() // delivers the events still queued

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, mf := range families {
		switch mf.GetName() {
		case "dlock_acquire_total", "dlock_release_total":
			for _, m := range mf.GetMetric() {
				// Every known label set is exported from New on: the
				// others are 0.
				if v := m.GetCounter().GetValue(); v > 0 {
					fmt.Println(mf.GetName(), m.GetLabel()[1].GetValue(), v)
				}
			}
		}
	}
	// Output:
	// dlock_acquire_total acquired 1
	// dlock_release_total released 1
}

// Per-lock labels from a mapping to a small set: here, the part of the
// name before the first colon, at most 20 values.
func ExampleWithLockLabel() {
	byPrefix := func(key string) string { p, _, _ := strings.Cut(key, ":"); return p }
	metrics, err := dlockprom.New(dlockprom.WithLockLabel(byPrefix, 20))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(metrics.MetricNames()), "metric families")
	// Output: 12 metric families
}

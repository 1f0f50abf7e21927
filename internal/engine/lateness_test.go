package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkDoneLateness measures how late Done closes after a fixed
// lease's validity deadline: the scheduling delay of the renewal loop,
// which is what the drift margin would have to absorb if Done were the
// only signal. Err does not depend on it (it reads the clock). Reported
// as p50, p99 and max over b.N leases of 20 ms, 64 at a time.
func BenchmarkDoneLateness(b *testing.B) {
	e := newTestEngine(b, nil)
	const ttl = 20 * time.Millisecond
	const parallel = 64
	var (
		mu   sync.Mutex
		late []time.Duration
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, parallel)
	for i := 0; b.Loop(); i++ {
		sem <- struct{}{}
		h, err := e.Acquire(context.Background(), lockReq(keyN(i), ttl, false, false))
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-h.Done()
			d := time.Since(h.Deadline())
			mu.Lock()
			late = append(late, d)
			mu.Unlock()
			<-sem
		}()
	}
	wg.Wait()
	slices.Sort(late)
	q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-late-µs")
	b.ReportMetric(q(0.99), "p99-late-µs")
	b.ReportMetric(q(1), "max-late-µs")
}

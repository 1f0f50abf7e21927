package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mutexWorker excludes through an in-process mutex, or not at all when
// broken, to check that the benchmark's overlap counter sees violations.
type mutexWorker struct {
	mu     *sync.Mutex
	broken bool
}

func (w mutexWorker) lock(ctx context.Context, _ string) (unlockFunc, error) {
	if w.broken {
		return func(context.Context) error { return nil }, nil
	}
	w.mu.Lock()
	return func(context.Context) error { w.mu.Unlock(); return nil }, nil
}

func (mutexWorker) close() {}

func runFake(broken bool) (overlaps int64, stats []workerStats) {
	spec := cycleSpec{workers: 4, sharedKey: true, hold: 200 * time.Microsecond}
	var mu sync.Mutex
	ks := &keyState{}
	var ov atomic.Int64
	start := time.Now()
	end := start.Add(100 * time.Millisecond)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	stats = make([]workerStats, spec.workers)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i] = runWorker(ctx, mutexWorker{mu: &mu, broken: broken}, "k", ks, spec, start, end, &ov)
		}()
	}
	wg.Wait()
	return ov.Load(), stats
}

func TestOverlapCounter(t *testing.T) {
	if ov, _ := runFake(true); ov == 0 {
		t.Error("no overlaps counted for a lock that does not exclude")
	}
	ov, stats := runFake(false)
	if ov != 0 {
		t.Errorf("%d overlaps counted for a mutex", ov)
	}
	var cycles, handoffs int64
	for _, s := range stats {
		cycles += s.cycles
		handoffs += int64(len(s.handoff))
		if s.errors != 0 {
			t.Errorf("errors: %v", s.firstErr)
		}
	}
	if cycles == 0 || handoffs == 0 {
		t.Errorf("cycles %d, handoffs %d: want both > 0", cycles, handoffs)
	}
}

func TestPercentileAndMedian(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4, 5}
	if got := percentile(d, 0.5); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := percentile(d, 0.99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
	if got := fmtRate(1234567.4); got != "1,234,567" {
		t.Errorf("fmtRate = %q", got)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// cycleSpec describes a workload of repeated lock/unlock cycles.
type cycleSpec struct {
	name      string
	title     string
	workers   int
	sharedKey bool          // all workers on one key, else one key each
	hold      time.Duration // time inside the critical section
	think     time.Duration // time between unlock and the next lock
}

var cycleWorkloads = []cycleSpec{
	{name: "serial", title: "serial: 1 worker, own key, lock+unlock", workers: 1},
	{name: "uncontended", title: "uncontended: 16 workers, distinct keys", workers: 16},
	{name: "handoff", title: "handoff: 4 workers, one key, hold 1 ms, think 1 ms", workers: 4,
		sharedKey: true, hold: time.Millisecond, think: time.Millisecond},
	{name: "contended", title: "contended max: 16 workers, one key, hold 0", workers: 16, sharedKey: true},
}

// keyState is the benchmark's own view of one lock, used to check mutual
// exclusion and to time handoffs.
type keyState struct {
	inside  atomic.Int32 // workers inside the critical section
	waiting atomic.Int32 // workers inside a Lock call
	// relAt is when the last release that had waiters started, as
	// nanoseconds since the run's start plus one; zero when none is pending.
	relAt atomic.Int64
}

// cycleResult is one peer's outcome in one cycle workload.
type cycleResult struct {
	err       error // setup failure: the peer did not run
	elapsed   time.Duration
	cycles    int64
	lat       []time.Duration // per cycle, lock call to unlock return; sorted
	handoff   []time.Duration // release start to next holder inside; sorted
	perWorker []int64
	held      time.Duration // total time inside the critical section
	overlaps  int64
	errors    int64
	firstErr  error
	use       usage
	// medianRate is set on pooled results: the median round's cycles/s.
	medianRate float64
}

// utilization is the share of wall time some worker was inside.
func (r *cycleResult) utilization() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return r.held.Seconds() / r.elapsed.Seconds()
}

func (r *cycleResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.cycles) / r.elapsed.Seconds()
}

// workerStats is what one worker goroutine collects.
type workerStats struct {
	cycles   int64
	lat      []time.Duration
	handoff  []time.Duration
	held     time.Duration
	errors   int64
	firstErr error
}

// runCycles runs one peer through spec for dur.
func (b *bench) runCycles(p peer, spec cycleSpec, dur time.Duration) cycleResult {
	workers := make([]worker, 0, spec.workers)
	defer func() {
		for _, w := range workers {
			w.close()
		}
		b.reset()
	}()
	for range spec.workers {
		w, err := p.newWorker(b.env)
		if err != nil {
			return cycleResult{err: err}
		}
		workers = append(workers, w)
	}
	keys := make([]string, spec.workers)
	states := make([]*keyState, spec.workers)
	shared := &keyState{}
	for i := range keys {
		keys[i], states[i] = fmt.Sprintf("bench:%s:%s:%d", spec.name, p.name, i), &keyState{}
		if spec.sharedKey {
			keys[i], states[i] = fmt.Sprintf("bench:%s:%s", spec.name, p.name), shared
		}
	}
	// Warm up connections and script caches, one worker at a time.
	for i, w := range workers {
		for range 3 {
			unlock, err := w.lock(context.Background(), keys[i])
			if err == nil {
				err = unlock(context.Background())
			}
			if err != nil {
				return cycleResult{err: fmt.Errorf("warm-up: %w", err)}
			}
		}
	}

	before := b.snapshot(p)
	stats := make([]workerStats, spec.workers)
	var overlaps atomic.Int64
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	start := time.Now().Add(20 * time.Millisecond)
	end := start.Add(dur)
	runCtx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			stats[i] = runWorker(runCtx, w, keys[i], states[i], spec, start, end, &overlaps)
		}()
	}
	time.Sleep(time.Until(start))
	close(startGate)
	wg.Wait()
	after := b.snapshot(p)

	r := cycleResult{elapsed: dur, overlaps: overlaps.Load(), use: after.sub(before)}
	for _, s := range stats {
		r.cycles += s.cycles
		r.lat = append(r.lat, s.lat...)
		r.handoff = append(r.handoff, s.handoff...)
		r.perWorker = append(r.perWorker, s.cycles)
		r.held += s.held
		r.errors += s.errors
		if r.firstErr == nil {
			r.firstErr = s.firstErr
		}
	}
	slices.Sort(r.lat)
	slices.Sort(r.handoff)
	return r
}

// runWorker is one worker's loop. Cycles that end after end are not
// counted; a Lock call still waiting at end is cancelled.
func runWorker(ctx context.Context, w worker, key string, ks *keyState, spec cycleSpec,
	start, end time.Time, overlaps *atomic.Int64) workerStats {
	var s workerStats
	fail := func(err error) {
		s.errors++
		if s.firstErr == nil {
			s.firstErr = err
		}
	}
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			return s
		}
		ks.waiting.Add(1)
		unlock, err := w.lock(ctx, key)
		ks.waiting.Add(-1)
		if err != nil {
			if ctx.Err() != nil {
				return s
			}
			fail(err)
			time.Sleep(time.Millisecond) // do not spin on a failing store
			continue
		}
		t1 := time.Now()
		if ks.inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		if rel := ks.relAt.Swap(0); rel != 0 {
			s.handoff = append(s.handoff, t1.Sub(start)-time.Duration(rel-1))
		}
		if spec.hold > 0 {
			time.Sleep(spec.hold)
		}
		t2 := time.Now()
		ks.inside.Add(-1)
		if ks.waiting.Load() > 0 {
			ks.relAt.Store(int64(t2.Sub(start)) + 1)
		}
		if err := unlock(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
			fail(fmt.Errorf("unlock: %w", err))
		}
		t3 := time.Now()
		if !t3.After(end) {
			s.cycles++
			s.lat = append(s.lat, t3.Sub(t0))
			s.held += t2.Sub(t1)
		}
		if spec.think > 0 {
			time.Sleep(spec.think)
		}
	}
}

// merge pools the rounds of one peer: counts and samples add up, and the
// per-round rates are returned for the median and the spread.
func merge(rs []cycleResult) (cycleResult, []float64) {
	var m cycleResult
	rates := make([]float64, 0, len(rs))
	for _, r := range rs {
		rates = append(rates, r.rate())
		m.elapsed += r.elapsed
		m.cycles += r.cycles
		m.lat = append(m.lat, r.lat...)
		m.handoff = append(m.handoff, r.handoff...)
		if m.perWorker == nil {
			m.perWorker = make([]int64, len(r.perWorker))
		}
		for i, c := range r.perWorker {
			m.perWorker[i] += c
		}
		m.held += r.held
		m.overlaps += r.overlaps
		m.errors += r.errors
		if m.firstErr == nil {
			m.firstErr = r.firstErr
		}
		m.use = m.use.add(r.use)
	}
	slices.Sort(m.lat)
	slices.Sort(m.handoff)
	slices.Sort(rates)
	return m, rates
}

// median returns the median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted[n/2]
}

// rateCell prints the median per-round rate and, with several rounds, the
// range.
func rateCell(rates []float64) string {
	med := median(rates)
	if len(rates) == 1 {
		return fmtRate(med)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtRate(med), fmtRate(rates[0]), fmtRate(rates[len(rates)-1]))
}

// runCycleWorkload runs every peer through spec in rounds, interleaved so
// that every peer sees the same machine noise, and pools the rounds.
func (b *bench) runCycleWorkload(spec cycleSpec, peers []peer) *table {
	results := make(map[string][]cycleResult)
	slice := b.duration / time.Duration(b.rounds)
	failed := make(map[string]bool)
	for round := range b.rounds {
		for _, p := range peers {
			if failed[p.name] {
				continue
			}
			r := b.runCycles(p, spec, slice)
			if r.err != nil {
				failed[p.name] = true
				results[p.name] = []cycleResult{r}
				b.logf("%s: %s: %v", spec.name, p.name, r.err)
				continue
			}
			b.logf("%s: %s round %d/%d: %.0f cycles/s", spec.name, p.name, round+1, b.rounds, r.rate())
			results[p.name] = append(results[p.name], r)
		}
	}
	t := &table{title: spec.title}
	switch spec.name {
	case "handoff":
		t.head = []string{"peer", "cycles/s", "utilization", "handoff p50", "handoff p99", "fairness min / max",
			"round trips/cycle", "overlaps", "errors"}
	case "contended":
		t.head = []string{"peer", "cycles/s", "cycle p50", "cycle p99", "fairness min / max", "round trips/cycle",
			"store cmds/cycle", "client CPU/cycle", "store CPU/cycle", "overlaps", "errors"}
	default:
		t.head = []string{"peer", "cycles/s", "cycle p50", "cycle p99", "round trips/cycle", "store cmds/cycle",
			"client CPU/cycle", "store CPU/cycle", "overlaps", "errors"}
	}
	for _, p := range peers {
		rs := results[p.name]
		if failed[p.name] {
			t.notes = append(t.notes, fmt.Sprintf("%s skipped: %v", p.name, rs[0].err))
			continue
		}
		r, rates := merge(rs)
		r.medianRate = median(rates)
		b.record(spec.name, p.name, r)
		errCell := fmt.Sprint(r.errors)
		if r.firstErr != nil {
			t.notes = append(t.notes, fmt.Sprintf("%s first error: %v", p.name, r.firstErr))
		}
		u, n, rc := r.use, r.cycles, rateCell(rates)
		switch spec.name {
		case "handoff":
			t.add(p.name, rc, fmt.Sprintf("%.2f", r.utilization()), fmtDur(percentile(r.handoff, 0.5)),
				fmtDur(percentile(r.handoff, 0.99)), fairness(r.perWorker), u.tripsPerCycle(n),
				fmt.Sprint(r.overlaps), errCell)
		case "contended":
			t.add(p.name, rc, fmtDur(percentile(r.lat, 0.5)), fmtDur(percentile(r.lat, 0.99)),
				fairness(r.perWorker), u.tripsPerCycle(n), u.cmdsPerCycle(n), u.clientCPUPerCycle(n), u.storeCPUPerCycle(n),
				fmt.Sprint(r.overlaps), errCell)
		default:
			t.add(p.name, rc, fmtDur(percentile(r.lat, 0.5)), fmtDur(percentile(r.lat, 0.99)),
				u.tripsPerCycle(n), u.cmdsPerCycle(n), u.clientCPUPerCycle(n), u.storeCPUPerCycle(n),
				fmt.Sprint(r.overlaps), errCell)
		}
	}
	if b.rounds > 1 {
		t.notes = append(t.notes, fmt.Sprintf("%d interleaved rounds of %v per peer; cycles/s is the median round (slowest–fastest round); the other columns pool all rounds", b.rounds, slice))
	}
	return t
}

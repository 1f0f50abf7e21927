package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// acquireParallelism is how many acquisitions the held workload keeps in
// flight while it takes its leases.
const acquireParallelism = 64

// acquireTimeout bounds the held workload's acquisition phase.
const acquireTimeout = 2 * time.Minute

// heldResult is one peer's outcome holding n leases.
type heldResult struct {
	err         error
	n           int
	acquire     time.Duration // time to take all n leases
	window      time.Duration
	use         usage // during the window
	memPerLease float64
	lost        int
}

// parallelDo calls fn(i) for every i in [0, n) from up to workers goroutines.
func parallelDo(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// runHeld takes n leases with one holder, keeps them for the window with
// auto-renewal on, and measures what keeping them costs.
func (b *bench) runHeld(p peer, n int) heldResult {
	defer b.reset()
	h, err := p.newHolder(b.env, b.heldTTL, n)
	if err != nil {
		return heldResult{err: err}
	}
	defer h.close()
	mem0 := memInUse()

	ctx, cancel := context.WithTimeout(context.Background(), acquireTimeout)
	defer cancel()
	var failed atomic.Int64
	var firstErr atomic.Value
	t0 := time.Now()
	parallelDo(n, acquireParallelism, func(i int) {
		if err := h.hold(ctx, fmt.Sprintf("held:%d", i)); err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err)
		}
	})
	acquire := time.Since(t0)
	if f := failed.Load(); f > 0 {
		return heldResult{err: fmt.Errorf("%d of %d acquisitions failed within %v: %v", f, n, acquireTimeout, firstErr.Load())}
	}
	mem1 := memInUse()

	before, w0 := b.snapshot(p), time.Now()
	time.Sleep(b.heldWindow)
	after, window := b.snapshot(p), time.Since(w0)
	return heldResult{
		n:           n,
		acquire:     acquire,
		window:      window,
		use:         after.sub(before),
		memPerLease: (float64(mem1) - float64(mem0)) / float64(n),
		lost:        h.lost(),
	}
}

// runHeldWorkload runs every auto-renewing peer at every lease count.
func (b *bench) runHeldWorkload(peers []peer) *table {
	t := &table{
		title: fmt.Sprintf("held at scale: one client holds N leases with auto-renewal for %v (TTL %v)", b.heldWindow, b.heldTTL),
		head: []string{"peer", "leases", "acquire all", "client CPU s/s", "store CPU s/s", "store cmds/s",
			"round trips/s", "heap+stack / lease", "lost"},
	}
	for _, n := range b.heldCounts {
		for _, p := range peers {
			if p.newHolder == nil {
				continue
			}
			b.logf("held: %s, %d leases", p.name, n)
			r := b.runHeld(p, n)
			if r.err != nil {
				t.notes = append(t.notes, fmt.Sprintf("%s at %d leases skipped: %v", p.name, n, r.err))
				continue
			}
			b.recordHeld(p.name, r)
			secs := r.window.Seconds()
			cmds := "–"
			if r.use.hasCommands {
				cmds = fmtRate(float64(r.use.commands) / secs)
			}
			t.add(p.name, fmtRate(float64(n)), fmtDur(r.acquire), fmt.Sprintf("%.3f", r.use.clientCPU.Seconds()/secs),
				fmt.Sprintf("%.3f", r.use.storeCPU/secs), cmds, fmt.Sprintf("%.1f", float64(r.use.trips)/secs),
				fmtBytes(r.memPerLease), fmt.Sprint(r.lost))
		}
	}
	var skipped []string
	renewal := map[string]string{
		"dlock":       "dlock renews every TTL/3 in batched, pipelined EVAL calls (up to 1,000 leases per call)",
		"rueidislock": "rueidislock is set to extend every TTL/3, one script call and one timer goroutine per lease",
		"etcd": fmt.Sprintf("etcd keeps one session lease (TTL %d s) alive for all keys over a keep-alive stream, "+
			"whose messages are not counted as round trips", ttlSeconds(b.heldTTL)),
		"dlock-etcd": "dlock-etcd attaches every lease of one TTL to one etcd lease; a renewal batch (up to 100 leases) " +
			"is one read-only Txn plus one LeaseKeepAliveOnce (a stream opened, counted as a round trip)",
	}
	for _, p := range peers {
		if p.newHolder == nil {
			skipped = append(skipped, p.name)
		} else if note, ok := renewal[p.name]; ok {
			t.notes = append(t.notes, note)
		}
	}
	t.notes = append(t.notes,
		"client CPU: getrusage of the benchmark process over the window; store CPU: the store server's user+sys time over the window",
		"store cmds/s counts the commands scripts run (a renewal script checks and extends each lease: 2 per lease)",
		"heap+stack / lease: (heap in use + goroutine stacks) after taking the leases minus before, divided by N")
	if len(skipped) > 0 {
		t.notes = append(t.notes, fmt.Sprintf("not run (no automatic renewal): %s", strings.Join(skipped, ", ")))
	}
	return t
}

package engine

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// A short critical section must not wake the renewal loop on every
// acquisition: the loop would otherwise run after each release, find no
// hold, plan to sleep an hour, and the next acquisition would kick it again
// — a goroutine switch per cycle, which cost a serial lock+unlock loop about
// 20 µs of CPU.
func TestShortLeasesDoNotWakeTheRenewerEachTime(t *testing.T) {
	e := newTestEngine(t, nil)
	ctx := context.Background()
	before := e.renewer.wakeups.Load()
	const cycles = 2000
	for range cycles {
		h, err := e.Acquire(ctx, lockReq("k", 30*time.Second, false, true))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched() // let a kicked loop run after the release, as it does when the release waits for the store
	}
	if n := e.renewer.wakeups.Load() - before; n > 10 {
		t.Fatalf("the renewal loop woke %d times in %d acquire+release cycles", n, cycles)
	}
}

// BenchmarkEngineOverhead is the engine's own cost per acquire+release
// cycle — hold, owner id, renewal bookkeeping — against the in-memory
// driver, so the store's and the network's share is left out.
func BenchmarkEngineOverhead(b *testing.B) {
	e := newTestEngine(b, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h, err := e.Acquire(ctx, lockReq("k", 30*time.Second, false, true))
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Release(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}

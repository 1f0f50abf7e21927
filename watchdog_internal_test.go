package dlock

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
)

// A short critical section must not wake the renewal loop on every Lock:
// the loop would otherwise run after each Unlock, find no lease, plan to
// sleep an hour, and the next Lock would kick it again — a goroutine
// switch per cycle, which cost a serial lock+unlock loop about 20 µs of CPU.
func TestShortLeasesDoNotWakeTheWatchdogEachTime(t *testing.T) {
	c, err := New(&clockDriver{}, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	before := c.watchdog.wakeups.Load()
	const cycles = 2000
	for range cycles {
		l, err := c.TryLock(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched() // let a kicked loop run after the Unlock, as it does when Unlock waits for the store
	}
	if n := c.watchdog.wakeups.Load() - before; n > 10 {
		t.Fatalf("the renewal loop woke %d times in %d lock+unlock cycles", n, cycles)
	}
}

// BenchmarkClientOverhead is dlock's own cost per TryLock+Unlock cycle —
// lease, owner id, watchdog bookkeeping — measured against an in-memory
// driver, so the store's and the network's share is left out.
func BenchmarkClientOverhead(b *testing.B) {
	c, err := New(&clockDriver{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryLock(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

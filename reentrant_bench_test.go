package dlock_test

import (
	"context"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// BenchmarkLockUnlockMem measures one Lock+Unlock cycle on the in-memory
// store: the client-side cost of a plain, non-nested acquisition (the
// reentrancy lookup is on this path and must not allocate).
func BenchmarkLockUnlockMem(b *testing.B) {
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockNestedMem measures one nested Lock+Unlock under a held
// lease's Context: no store call, only the hold's own bookkeeping.
func BenchmarkLockNestedMem(b *testing.B) {
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	outer, err := c.Lock(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer outer.Unlock(ctx)
	lctx := outer.Context()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(lctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

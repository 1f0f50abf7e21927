package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// Releasing or losing the outer lease ends its nested holds at once, with
// the outer's reason; their Unlock then reports it.
func TestReentrantOuterEndEndsNested(t *testing.T) {
	drv := memdriver.New()
	c := newMemLocker(t, drv)
	ctx := leasecheck.Context(t, 10*time.Second)

	outer, err := c.Lock(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock(outer.Context(), "released")
	if err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inner.Done():
	default:
		t.Fatal("nested Done still open after the outer Unlock returned")
	}
	if !errors.Is(inner.Err(), dlock.ErrReleased) || !errors.Is(context.Cause(inner.Context()), dlock.ErrReleased) {
		t.Fatalf("nested Err %v, cause %v", inner.Err(), context.Cause(inner.Context()))
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatalf("nested Unlock after the outer's: %v", err)
	}

	const ttl = 300 * time.Millisecond // renewed, not lost, until the forced release, however loaded the machine
	outer, err = c.Lock(ctx, "lost", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	inner, err = c.Lock(outer.Context(), "lost")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := drv.ForceRelease(ctx, "lost"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	leasecheck.WaitDone(t, inner, 20*ttl) // the next renewal finds the lock gone
	if !errors.Is(inner.Err(), dlock.ErrLockLost) || !errors.Is(outer.Err(), dlock.ErrLockLost) {
		t.Fatalf("nested Err %v, outer Err %v", inner.Err(), outer.Err())
	}
	for range 2 {
		if err := inner.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("nested Unlock after the lock was lost: %v, want ErrNotHeld", err)
		}
	}
	if n := inner.Holds(); n != 0 {
		t.Fatalf("Holds of an ended lease = %d", n)
	}
}

// A nested hold's Context still carries every lease its Lock ctx descended
// from: A, then B under A, then A nested under B, then B nested under
// that — no Lock waits for its own caller's lock.
func TestReentrantAcrossKeys(t *testing.T) {
	c := newMemLocker(t, memdriver.New())
	ctx := leasecheck.Context(t, 5*time.Second)
	a, err := c.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Lock(a.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Nested() || b.Token() == a.Token() {
		t.Fatalf("another key under a lease: nested %v, token %d (a's %d)", b.Nested(), b.Token(), a.Token())
	}
	a2, err := c.Lock(b.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := c.Lock(a2.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Nested() || !b2.Nested() || a2.Token() != a.Token() || b2.Token() != b.Token() {
		t.Fatalf("nested: a2 %v/%d, b2 %v/%d; want a %d, b %d", a2.Nested(), a2.Token(), b2.Nested(), b2.Token(), a.Token(), b.Token())
	}
	if a.Holds() != 2 || b.Holds() != 2 {
		t.Fatalf("Holds a %d, b %d; want 2 and 2", a.Holds(), b.Holds())
	}
	// b2 is a child of b's Context, not of a2's: ending a ends a2 and,
	// through b's Context (a child of a's), b and b2 stay until b ends.
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if b2.Err() == nil || a2.Err() != nil || a.Err() != nil {
		t.Fatalf("after b's Unlock: b2 %v, a2 %v, a %v", b2.Err(), a2.Err(), a.Err())
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if a2.Err() == nil {
		t.Fatal("a2 outlived a")
	}
}

// Leases of different Clients never nest: a Lock of another Client under
// the lease's Context waits like any stranger, and TryLock is refused.
func TestReentrantNotAcrossClients(t *testing.T) {
	drv := memdriver.New()
	c1, c2 := newMemLocker(t, drv), newMemLocker(t, drv.Connect())
	ctx := leasecheck.Context(t, 5*time.Second)
	l, err := c1.Lock(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.TryLock(l.Context(), "shared"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of another Client under the lease: %v, want ErrNotAcquired", err)
	}
	short, cancel := context.WithTimeout(l.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c2.Lock(short, "shared"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of another Client under the lease: %v, want DeadlineExceeded", err)
	}
	if l.Holds() != 1 {
		t.Fatalf("Holds = %d", l.Holds())
	}
}

// WithoutReentry on the nested call, or on the outer lease, makes the
// nested Lock fail at once with ErrReentry, instead of waiting for its own
// lock; a Lock of another key under it is unaffected.
func TestWithoutReentry(t *testing.T) {
	c := newMemLocker(t, memdriver.New())
	ctx := leasecheck.Context(t, 5*time.Second)
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(l.Context(), "k", dlock.WithoutReentry()); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("Lock WithoutReentry under the lease: %v, want ErrReentry", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	strict, err := c.Lock(ctx, "k", dlock.WithoutReentry())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(strict.Context(), "k"); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("Lock under a lease taken WithoutReentry: %v, want ErrReentry", err)
	}
	if _, err := c.TryLock(strict.Context(), "k"); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("TryLock under a lease taken WithoutReentry: %v, want ErrReentry", err)
	}
	other, err := c.Lock(strict.Context(), "other")
	if err != nil || other.Nested() {
		t.Fatalf("another key under it: %v, nested %v", err, other != nil && other.Nested())
	}
	if strict.Holds() != 1 || strict.Err() != nil {
		t.Fatalf("refused re-entries changed the lease: Holds %d, Err %v", strict.Holds(), strict.Err())
	}
}

// A nested Lock honours its ctx; bad options are still errors; a lease
// that ended is not re-entered (its Context is done).
func TestReentrantEdges(t *testing.T) {
	c := newMemLocker(t, memdriver.New())
	ctx := leasecheck.Context(t, 5*time.Second)
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(l.Context())
	cancel()
	if _, err := c.Lock(done, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("nested Lock with a done ctx: %v", err)
	}
	if _, err := c.Lock(l.Context(), "k", dlock.WithTTL(-1)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Fatalf("nested Lock with a bad TTL: %v", err)
	}
	if l.Holds() != 1 {
		t.Fatalf("Holds = %d after failed nested calls", l.Holds())
	}
	inner, err := c.Lock(l.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := inner.Unlock(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("nested Unlock(nil): %v", err)
	}
	if inner.Err() == nil || l.Holds() != 1 {
		t.Fatalf("nested Unlock(nil) did not end the hold: Err %v, Holds %d", inner.Err(), l.Holds())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(l.Context(), "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock under an ended lease: %v, want its ctx error", err)
	}
	// Only its values left: a new acquisition, not a nested one.
	fresh, err := c.Lock(context.WithoutCancel(l.Context()), "k")
	if err != nil || fresh.Nested() || fresh.Token() == l.Token() {
		t.Fatalf("Lock under an ended lease's values: %v", err)
	}
}

// Close ends nested holds with the outer lease: ErrClosed.
func TestReentrantClose(t *testing.T) {
	c, err := dlock.New(memdriver.New(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := leasecheck.Context(t, 5*time.Second)
	outer, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock(outer.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner.Err(), dlock.ErrClosed) {
		t.Fatalf("nested Err after Close: %v", inner.Err())
	}
	if err := inner.Unlock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("nested Unlock after Close: %v, want ErrClosed", err)
	}
}

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

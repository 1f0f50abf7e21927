package once_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/once"
)

func newProcessor(t *testing.T, opts ...once.Option) (*once.Processor, *dlock.Client) {
	t.Helper()
	locks, err := dlock.New(memdriver.New(), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	p, err := once.New(locks, once.NewMemStore(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p, locks
}

func ok(context.Context, uint64) ([]byte, error) { return []byte("ok"), nil }

// Bad input is ErrInvalidArgument and runs nothing.
func TestBadInput(t *testing.T) {
	p, locks := newProcessor(t)
	checks := map[string]error{}
	_, checks["nil client"] = once.New(nil, once.NewMemStore())
	_, checks["nil store"] = once.New(locks, nil)
	_, checks["nil option"] = once.New(locks, once.NewMemStore(), nil)
	_, checks["retention 0"] = once.New(locks, once.NewMemStore(), once.WithRetention(0))
	_, checks["duplicates 9"] = once.New(locks, once.NewMemStore(), once.WithDuplicates(9))
	_, checks["nil lock option"] = once.New(locks, once.NewMemStore(), once.WithLockOptions(nil))
	_, checks["empty key"] = p.Do(context.Background(), "", nil, ok)
	_, checks["nil fn"] = p.Do(context.Background(), "k", nil, nil)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, _, checks["nil ctx"] = p.Begin(nil, "k", nil)
	for what, err := range checks {
		if !errors.Is(err, once.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	if _, found, _ := p.Get(context.Background(), "k"); found {
		t.Error("bad calls left a record")
	}
}

// A function that panics leaves the record in progress but releases the
// lock: the next delivery takes the key over at once, with a higher token.
func TestPanicReleasesTheLock(t *testing.T) {
	p, _ := newProcessor(t, once.WithDuplicates(once.DuplicatesReplay))
	ctx := context.Background()
	var first uint64
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		p.Do(ctx, "k", nil, func(_ context.Context, tok uint64) ([]byte, error) { first = tok; panic("boom") })
	}()
	rec, _, _ := p.Get(ctx, "k")
	if rec.State != once.InProgress {
		t.Fatalf("record after a panic: %v", rec.State)
	}
	// DuplicatesReplay does not wait: a lock still held would be ErrInProgress.
	res, err := p.Do(ctx, "k", nil, ok)
	if err != nil || res.Replayed || res.Token <= first {
		t.Fatalf("delivery after the panic: %+v, %v (first token %d)", res, err, first)
	}
}

// The caller giving up ends fn's context; a result fn returns anyway is
// still recorded, so the next delivery does not run the work again.
func TestCallerCancelStillCompletes(t *testing.T) {
	p, _ := newProcessor(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("client went away")
	var cause error
	res, err := p.Do(ctx, "k", nil, func(ctx context.Context, _ uint64) ([]byte, error) {
		cancel(gone)
		<-ctx.Done()
		cause = context.Cause(ctx)
		return []byte("done anyway"), nil
	})
	if err != nil || string(res.Value) != "done anyway" {
		t.Fatalf("Do: %+v, %v", res, err)
	}
	if !errors.Is(cause, gone) {
		t.Errorf("fn's ctx ended with %v, want the caller's cause", cause)
	}
	again, err := p.Do(context.Background(), "k", nil, func(context.Context, uint64) ([]byte, error) {
		t.Error("work ran again")
		return nil, nil
	})
	if err != nil || !again.Replayed || string(again.Value) != "done anyway" {
		t.Errorf("next delivery: %+v, %v", again, err)
	}
}

// Work that finished after its caller's ctx ended is recorded and its lock
// released within completeTimeout (5 s), even when the lock store does not
// answer: the release then goes on in the background. Before, the release
// ran with no bound at all, and Do waited on the lock store for as long as
// its driver let it (forever here).
func TestDoReturnsWithTheLockStoreStalled(t *testing.T) {
	drv := memdriver.New()
	locks, err := dlock.New(drv, dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	p, err := once.New(locks, once.NewMemStore())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Do(ctx, "k", nil, func(ctx context.Context, _ uint64) ([]byte, error) {
			// The caller goes away, and the lock store stops answering releases.
			drv.SetFault(func(ctx context.Context, op string) error {
				if op == memdriver.OpRelease {
					<-ctx.Done()
					return ctx.Err()
				}
				return nil
			})
			cancel()
			<-ctx.Done()
			return []byte("done"), nil
		})
		done <- err
	}()
	defer drv.SetFault(nil) // before the Client's Close
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Do: %v, want the completed work's nil error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do had not returned 10s after its work finished, with the lock store stalled")
	}
}

// A Claim from Begin: its context ends when it is ended; ending it twice
// is harmless; Release leaves the record for the next delivery.
func TestClaimLifecycle(t *testing.T) {
	p, _ := newProcessor(t)
	ctx := context.Background()
	c, _, err := p.Begin(ctx, "k", []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Key() != "k" || c.Token() == 0 || c.Token() != c.Lease().Token() || c.Retention() != once.DefaultRetention {
		t.Errorf("claim: key %q token %d lease token %d retention %v", c.Key(), c.Token(), c.Lease().Token(), c.Retention())
	}
	c.Release(ctx)
	c.Release(ctx)
	if c.Context().Err() == nil || c.Lease().Err() == nil {
		t.Error("released claim's context or lease still live")
	}
	if err := c.Complete(ctx, []byte("late")); err != nil {
		// The lease is released but the record still ours: the token
		// decides, and no one claimed since.
		t.Fatalf("Complete after Release, nobody else claimed: %v", err)
	}
	res, err := p.Do(ctx, "k", []byte("p"), ok)
	if err != nil || !res.Replayed || string(res.Value) != "late" {
		t.Errorf("next delivery: %+v, %v", res, err)
	}
	if _, err := p.Do(ctx, "other", []byte("p"), func(context.Context, uint64) ([]byte, error) {
		return nil, errors.New("x")
	}); err == nil {
		t.Error("failing fn: no error")
	}
	c2, _, err := p.Begin(ctx, "other", []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Release(ctx)
	if err := c2.Fail(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := p.Get(ctx, "other"); rec.State != once.Failed || rec.Token != c2.Token() {
		t.Errorf("record after Fail: %v token %d", rec.State, rec.Token)
	}
}

// A waiting duplicate gives up with its ctx: the error matches ctx.Err().
func TestWaitingDuplicateHonoursCtx(t *testing.T) {
	p, _ := newProcessor(t)
	c, _, err := p.Begin(context.Background(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Do(ctx, "k", nil, ok); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting duplicate: %v, want DeadlineExceeded", err)
	}
}

// A Do of a key under its own claim's context does not nest into the
// running delivery (dlock's reentrancy): it fails with dlock.ErrReentry
// and the work runs once.
func TestNestedDoIsRefused(t *testing.T) {
	p, _ := newProcessor(t)
	runs := 0
	var nested error
	_, err := p.Do(context.Background(), "k", nil, func(ctx context.Context, _ uint64) ([]byte, error) {
		runs++
		_, nested = p.Do(ctx, "k", nil, func(context.Context, uint64) ([]byte, error) { runs++; return nil, nil })
		return []byte("once"), nil
	})
	if err != nil || runs != 1 || !errors.Is(nested, dlock.ErrReentry) {
		t.Fatalf("outer: %v, runs %d, nested Do: %v; want one run and ErrReentry", err, runs, nested)
	}
}

package fence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/memdriver"
)

func newClient(t *testing.T) *dlock.Client {
	t.Helper()
	c, err := dlock.New(memdriver.New())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestDoRunsUnderLockAndReleases(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	var got fence.Token
	err := fence.Do(ctx, c, "order:42", func(ctx context.Context, tok fence.Token) error {
		got = tok
		// Held while fn runs: nobody else gets it.
		if _, err := c.TryLock(ctx, "order:42"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("TryLock inside fn: %v", err)
		}
		return ctx.Err()
	})
	if err != nil || got == 0 {
		t.Fatalf("Do: %v, token %d", err, got)
	}
	// Released after: the next holder gets a higher token.
	lease, err := c.TryLock(ctx, "order:42")
	if err != nil {
		t.Fatalf("after Do: %v", err)
	}
	defer lease.Unlock(ctx)
	if lease.Token() <= got {
		t.Fatalf("token %d after %d", lease.Token(), got)
	}
}

func TestDoReturnsFnError(t *testing.T) {
	c := newClient(t)
	boom := errors.New("boom")
	err := fence.Do(context.Background(), c, "k", func(context.Context, fence.Token) error { return boom })
	if err != boom {
		t.Fatalf("Do returned %v, want fn's error itself", err)
	}
	if _, ok, _ := c.Inspect(context.Background(), "k"); ok {
		t.Fatal("the lock is still held after fn failed")
	}
}

// TestDoLeaseLost: when the lease ends while fn runs, fn's context ends
// with the lease's cause, and Do says so even if fn returned nil.
func TestDoLeaseLost(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()

	// The lease runs out (no watchdog): fn waits for its context.
	err := fence.Do(ctx, c, "expire", func(ctx context.Context, tok fence.Token) error {
		<-ctx.Done()
		if cause := context.Cause(ctx); !errors.Is(cause, dlock.ErrLockLost) {
			t.Errorf("cause %v, want ErrLockLost", cause)
		}
		return ctx.Err()
	}, dlock.WithTTL(50*time.Millisecond), dlock.WithoutWatchdog())
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("lease expired in fn: %v, want ErrLockLost and fn's context.Canceled", err)
	}

	// An operator breaks the lock: the lease has not noticed yet when fn
	// returns nil, but the release finds the lock gone.
	err = fence.Do(ctx, c, "forced", func(ctx context.Context, tok fence.Token) error {
		if _, ok, err := c.ForceRelease(ctx, "forced"); !ok || err != nil {
			t.Errorf("ForceRelease: %v %v", ok, err)
		}
		return nil
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("lock broken in fn: %v, want ErrLockLost", err)
	}
}

// TestDoContextErrPrompt: fn's ctx.Err reports the lease's end as soon as
// its deadline passes, without waiting for the renewal goroutine.
func TestDoContextErrPrompt(t *testing.T) {
	c := newClient(t)
	err := fence.Do(context.Background(), c, "k", func(ctx context.Context, tok fence.Token) error {
		deadline := time.Now().Add(40 * time.Millisecond)
		for ctx.Err() == nil {
			if time.Now().After(deadline.Add(2 * time.Second)) {
				t.Error("ctx.Err still nil long after the lease's deadline")
				return nil
			}
		}
		select {
		case <-ctx.Done():
		default:
			t.Error("ctx.Err reported but Done not closed")
		}
		return nil
	}, dlock.WithTTL(40*time.Millisecond), dlock.WithoutWatchdog())
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do: %v", err)
	}
}

func TestDoCallerCancel(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := fence.Do(ctx, c, "k", func(fctx context.Context, tok fence.Token) error {
		cancel()
		<-fctx.Done()
		return fctx.Err()
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do after the caller cancelled: %v", err)
	}
	// The release went to the background (ctx was done); it completes.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ok, err := c.Inspect(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock was not released after the caller's ctx ended")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDoReleasesOnPanic(t *testing.T) {
	c := newClient(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach the caller")
			}
		}()
		_ = fence.Do(context.Background(), c, "k", func(context.Context, fence.Token) error { panic("in fn") })
	}()
	if _, ok, _ := c.Inspect(context.Background(), "k"); ok {
		t.Fatal("the lock is still held after fn panicked")
	}
}

func TestDoBadInput(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	noop := func(context.Context, fence.Token) error { return nil }
	if err := fence.Do(ctx, nil, "k", noop); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil locker: %v", err)
	}
	var none *dlock.Client // a nil Client in the interface: not nil, but no Client
	if err := fence.Do(ctx, none, "k", noop); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil *dlock.Client: %v", err)
	}
	if err := fence.Do(ctx, c, "k", nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil fn: %v", err)
	}
	if err := fence.Do(ctx, c, "", noop); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := fence.Run(ctx, nil, noop); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil lease: %v", err)
	}
	lease, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	called := false
	err = fence.Run(ctx, lease, func(context.Context, fence.Token) error { called = true; return nil })
	if !errors.Is(err, dlock.ErrReleased) || called {
		t.Errorf("Run on a released lease: %v, fn called %v", err, called)
	}
}

package dlock_test

// Client on the in-memory store, for what is the same whatever the store.
// The rest of the Client, and what only a real server shows, is tested
// against a real redis-server in client_redis_test.go.

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

func TestLockCancelledReturnsContextError(t *testing.T) {
	store := memdriver.New()
	a, b := newMemLocker(t, store), newMemLocker(t, store.Connect())
	l, err := a.Lock(leasecheck.Context(t, 5*time.Second), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx, "busy")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

// A fair Lock racing its own Client's Close must not leave the name held
// by nobody: whatever its Enqueue queued or was granted is released by the
// time Close returns, even when the reply came in after Close had stopped
// tracking leases. Close hands the held lock to that very waiter, so a
// grant dropped on the way would keep the name busy for a whole TTL. The
// race is narrow; many rounds find it.
func TestCloseReleasesWhatARacingWaiterWasGranted(t *testing.T) {
	store := memdriver.New()
	probe := newMemLocker(t, store.Connect())
	ctx := leasecheck.Context(t, 30*time.Second)
	for round := range 300 {
		key := "closing-" + strconv.Itoa(round)
		c, err := dlock.New(store.Connect(), dlock.WithLogger(leasecheck.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lock(ctx, key); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { _, err := c.Lock(ctx, key); waited <- err }()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("round %d: the waiting Lock after Close: %v, want ErrClosed", round, err)
		}
		l, err := probe.TryLock(ctx, key)
		if err != nil {
			t.Fatalf("round %d: %q is still held after its only Client closed: %v", round, key, err)
		}
		_ = l.Unlock(ctx)
	}
}

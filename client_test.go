package dlock_test

// Client on the in-memory store, for what is the same whatever the store.
// The rest of the Client, and what only a real server shows, is tested
// against a real redis-server in client_redis_test.go.

import (
	"context"
	"errors"
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

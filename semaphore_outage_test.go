package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// A waiter whose place passed its validity deadline while the store was
// unreachable (its renewals failed) asks the store again with the same id,
// and may be granted. A release of that place sent when the deadline
// passed, still in flight then (a client library retrying through the
// outage), must not land after that grant: it would free the permit the
// waiter now holds, and the store would grant it to another while the
// waiter's lease is valid — N+1 permits. That is how a Redis restart
// from a complete append-only file let 4 permits of 2 be valid at once.
func TestSemaphoreWaiterPlaceLostInOutageKeepsItsGrant(t *testing.T) {
	const ttl = 300 * time.Millisecond
	drv := memdriver.New()
	var down atomic.Bool
	releaseEntered := make(chan struct{})
	var enteredOnce sync.Once
	gate := make(chan struct{})
	drv.SetFault(func(ctx context.Context, op string) error {
		if !down.Load() {
			return nil
		}
		switch op {
		case memdriver.OpRenew:
			return errors.New("store unreachable")
		case memdriver.OpRelease:
			// In flight until the test lets it land.
			enteredOnce.Do(func() { close(releaseEntered) })
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return nil
	})
	holder, err := dlock.New(drv.Connect(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()), dlock.WithDefaultTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	ctx := leasecheck.Context(t, 20*time.Second)
	const name = "pool"

	h := leasecheck.Got(t)(holder.Semaphore(name, 1).Acquire(ctx))
	ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return waiter.Semaphore(name, 1).Acquire(ctx) })
	waitWaiters(t, drv, name, 1)
	q, _, err := drv.InspectQueue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	id := q.Waiters[0].ID

	// The outage: renewals fail until the place's validity deadline has
	// passed, and the waiter has queued its place again.
	var requeued atomic.Bool
	releaseLanded := make(chan struct{})
	var landedOnce sync.Once
	drv.SetFaultAfter(func(_ context.Context, op string) error {
		switch {
		case op == memdriver.OpEnqueue && down.Load():
			requeued.Store(true)
		case op == memdriver.OpRelease && !down.Load():
			landedOnce.Do(func() { close(releaseLanded) })
		}
		return nil
	})
	down.Store(true)
	deadline := time.Now().Add(5 * ttl)
	for !requeued.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not ask the store again within %v of losing renewals", 5*ttl)
		}
		time.Sleep(time.Millisecond)
	}
	// A release of the place, if one was sent, enters the store at once;
	// the bound only ends the wait for one that is not sent.
	released := false
	select {
	case <-releaseEntered:
		released = true
	case <-time.After(ttl):
	}
	down.Store(false)
	leasecheck.Unlock(t, h)
	p := leasecheck.Receive(t, ch, "waiter")
	if p.ID() != id {
		t.Fatalf("granted id %q, want the waiter's %q (its place kept)", p.ID(), id)
	}
	close(gate)
	if released {
		select {
		case <-releaseLanded:
		case <-time.After(10 * time.Second):
			t.Fatal("the release in flight never landed")
		}
	}
	q, _, err = drv.InspectQueue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if p.Err() == nil && (len(q.Holders) != 1 || q.Holders[0].ID != id) {
		t.Fatalf("the waiter holds its permit, but the store records %+v (a release of its old place landed after the grant: released=%v)",
			q.Holders, released)
	}
	if _, err := holder.Semaphore(name, 1).TryAcquire(ctx); p.Err() == nil && !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a second permit of 1 while the waiter holds its own: %v", err)
	}
	leasecheck.Unlock(t, p)
}

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

func TestSemaphoreAdmitsNAndNoMore(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	s := c.Semaphore("pool", 3)
	if s.Name() != "pool" || s.N() != 3 {
		t.Fatalf("handle: %q %d", s.Name(), s.N())
	}
	var held []*dlock.Lease
	ids := map[string]bool{}
	for i := range 3 {
		p := leasecheck.Got(t)(s.TryAcquire(ctx))
		if ids[p.ID()] || p.Err() != nil || len(p.ID()) != 32 {
			t.Fatalf("permit %d: id %q (seen %v), err %v", i, p.ID(), ids[p.ID()], p.Err())
		}
		ids[p.ID()] = true
		held = append(held, p)
	}
	q, _, err := c.InspectQueue(ctx, "pool")
	if err != nil || len(q.Holders) != 3 {
		t.Fatalf("InspectQueue: %+v %v", q, err)
	}
	for _, h := range q.Holders {
		if !ids[h.ID] {
			t.Fatalf("operators see permit id %q, not one of the leases' %v", h.ID, ids)
		}
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("fourth permit: %v, want ErrNotAcquired", err)
	}
	leasecheck.Unlock(t, held[1])
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want nil", err)
	}
	p := leasecheck.Got(t)(s.Acquire(ctx))
	if ids[p.ID()] {
		t.Fatalf("id %q reused", p.ID())
	}
	for _, l := range []*dlock.Lease{held[0], held[2], p} {
		leasecheck.Unlock(t, l)
	}
	// Nothing is left held: all three permits are free again.
	for range 3 {
		defer leasecheck.Unlock(t, leasecheck.Got(t)(s.TryAcquire(ctx)))
	}
}

// A permit that was lost is not given back by its late Unlock: the
// permits of the other holders are untouched.
func TestSemaphoreLostPermitCannotReleaseAnother(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	s := c.Semaphore("one", 1)
	old := leasecheck.Got(t)(s.TryAcquire(ctx, dlock.WithTTL(50*time.Millisecond), dlock.WithoutWatchdog()))
	next := leasecheck.Got(t)(s.Acquire(ctx)) // granted once old has expired
	if old.Err() == nil {
		t.Fatal("second permit granted while the first is valid")
	}
	if err := old.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("unlock of the expired permit: %v, want ErrNotHeld", err)
	}
	if _, err := s.TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("after the stale unlock: %v, want ErrNotAcquired (the live permit is held)", err)
	}
	leasecheck.Unlock(t, next)
}

// N is the name's while its permits are held or waited for: a handle with
// another N, smaller or larger, is refused with ErrLimitMismatch, waiting
// or not, and the permits held stay valid; the queue keeps the name's N
// too; once the name is idle, the next N is the name's.
func TestSemaphoreChangingN(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	var held []*dlock.Lease
	for range 3 {
		held = append(held, leasecheck.Got(t)(c.Semaphore("resize", 3).TryAcquire(ctx)))
	}
	for _, n := range []int{2, 5} {
		if _, err := c.Semaphore("resize", n).TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
			t.Fatalf("TryAcquire with N=%d while 3 of N=3 are held: %v, want ErrLimitMismatch", n, err)
		}
		if _, err := c.Semaphore("resize", n).Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
			t.Fatalf("Acquire with N=%d while 3 of N=3 are held: %v, want ErrLimitMismatch", n, err)
		}
	}
	for _, l := range held {
		if l.Err() != nil {
			t.Fatalf("a held permit ended after a refused N: %v", l.Err())
		}
	}
	// A waiter keeps the name's N while the permits go.
	wch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return c.Semaphore("resize", 3).Acquire(ctx) })
	leasecheck.WaitInQueue(t, c, "resize", 1)
	for _, l := range held {
		leasecheck.Unlock(t, l)
	}
	if _, err := c.Semaphore("resize", 5).TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
		t.Fatalf("N=5 while the N=3 waiter's permit is held: %v, want ErrLimitMismatch", err)
	}
	leasecheck.Unlock(t, leasecheck.Receive(t, wch, "the N=3 waiter"))
	// Idle: N=5 is the name's now.
	big := c.Semaphore("resize", 5)
	held = held[:0]
	for range 5 {
		held = append(held, leasecheck.Got(t)(big.TryAcquire(ctx)))
	}
	if _, err := big.TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a sixth permit of N=5: %v, want ErrNotAcquired", err)
	}
	for _, l := range held {
		leasecheck.Unlock(t, l)
	}
}

// A holder whose process died (its store connection fails from then on,
// so it neither renews nor releases) gives its permit back within one TTL.
func TestSemaphoreDeadHolderReclaimedWithinTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	dead, store := newMemClient(t, nil)
	live, _ := newMemClient(t, store)
	ctx := leasecheck.Context(t, 10*time.Second)
	p := leasecheck.Got(t)(dead.Semaphore("crash", 1).Acquire(ctx, dlock.WithTTL(ttl)))
	died := time.Now()
	store.SetFault(func(context.Context, string) error { return errors.New("process gone") })
	q := leasecheck.Got(t)(live.Semaphore("crash", 1).Acquire(ctx, dlock.WithTTL(ttl)))
	took := time.Since(died)
	if took > ttl+300*time.Millisecond {
		t.Fatalf("permit reclaimed %v after its holder died, TTL %v", took, ttl)
	}
	if p.Err() == nil {
		t.Fatal("the dead holder's lease still reports held after the permit was given away")
	}
	leasecheck.Unlock(t, q)
}

func TestSemaphoreBadInput(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	for _, n := range []int{0, -1, dlock.MaxPermits + 1} {
		if _, err := c.Semaphore("s", n).TryAcquire(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("n=%d: %v, want ErrInvalidArgument", n, err)
		}
		if _, err := c.Semaphore("s", n).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("n=%d: %v, want ErrInvalidArgument", n, err)
		}
	}
	if _, err := c.Semaphore("", 2).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("empty name: %v", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.Semaphore("s", 2).Acquire(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("nil ctx: %v", err)
	}
}

// Waiters are served in arrival order.
func TestSemaphoreServesInArrivalOrder(t *testing.T) {
	c, _ := newMemClient(t, nil)
	semaphoreServesInArrivalOrder(t, c)
}

func semaphoreServesInArrivalOrder(t *testing.T, c *dlock.Client) {
	ctx := leasecheck.Context(t, 20*time.Second)
	s := c.Semaphore("fifo", 1)
	holder := leasecheck.Got(t)(s.Acquire(ctx))
	var chans []<-chan *dlock.Lease
	for i := range 4 {
		chans = append(chans, leasecheck.Acquired(t, func() (*dlock.Lease, error) { return s.Acquire(ctx) }))
		leasecheck.WaitInQueue(t, c, "fifo", i+1)
	}
	leasecheck.Unlock(t, holder)
	for i, ch := range chans {
		l := leasecheck.Receive(t, ch, "waiter")
		for _, later := range chans[i+1:] {
			leasecheck.NotYet(t, later, "a later waiter")
		}
		leasecheck.Unlock(t, l)
	}
}

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

package dlock_test

// The fair lock on the in-memory store: how it meets the plain lock, a driver
// without queues, a lost notification and a lost reply. Against a real
// redis-server, with the queue's scripts: fair_redis_test.go.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

type fairResult struct {
	who   int
	lease *dlock.Lease
	err   error
}

// fairWaiter starts a Lock(WithFIFO) of key on c and reports on out.
func fairWaiter(ctx context.Context, c *dlock.Client, key string, who int, out chan<- fairResult, opts ...dlock.LockOption) {
	go func() {
		l, err := c.Lock(ctx, key, append([]dlock.LockOption{dlock.WithFIFO()}, opts...)...)
		out <- fairResult{who, l, err}
	}()
}

// Fair and plain acquisitions of one key exclude each other; a plain
// TryLock never takes a key ahead of its queued waiters.
func TestFairLockWithPlainLock(t *testing.T) {
	drv := memdriver.New()
	c, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := leasecheck.Context(t, 10*time.Second)
	plain, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan fairResult, 1)
	fairWaiter(ctx, c, "k", 1, out)
	waitWaitersMem(t, drv, "k", 1)
	if err := plain.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("plain TryLock of a fair-held key: %v", err)
	}
	fairWaiter(ctx, c, "k", 2, out)
	waitWaitersMem(t, drv, "k", 1)
	if err := r.lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := <-out
	if r2.err != nil {
		t.Fatalf("second fair waiter: %v", r2.err)
	}
	if r2.lease.Token() <= r.lease.Token() {
		t.Fatalf("second fair waiter: token %d after %d", r2.lease.Token(), r.lease.Token())
	}
	if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("plain TryLock while a fair holder holds: %v", err)
	}
	if _, err := c.TryLock(ctx, "k", dlock.WithFIFO()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("fair TryLock while a fair holder holds: %v", err)
	}
	_ = r2.lease.Unlock(ctx)
	l, err := c.TryLock(ctx, "k", dlock.WithFIFO())
	if err != nil {
		t.Fatalf("fair TryLock of a free key: %v", err)
	}
	if l.Token() <= r2.lease.Token() {
		t.Fatalf("fair TryLock: token %d after %d", l.Token(), r2.lease.Token())
	}
	_ = l.Unlock(ctx)
}

func waitWaitersMem(t *testing.T, d *memdriver.Driver, key string, n int) {
	t.Helper()
	waitWaiters(t, d, key, n)
}

// A driver without queued leases refuses WithFIFO with ErrUnsupported,
// also in a nested call (whose options are checked, though they do not
// change the hold); before, the nested call succeeded.
func TestFairLockUnsupported(t *testing.T) {
	c, err := dlock.New(plainOnly{memdriver.New()}, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Lock(context.Background(), "k", dlock.WithFIFO()); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("WithFIFO on a driver without queues: %v, want ErrUnsupported", err)
	}
	if _, err := c.TryLock(context.Background(), "k", dlock.WithFIFO()); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("TryLock WithFIFO on a driver without queues: %v, want ErrUnsupported", err)
	}
	// The standard library's sentinel too, as the driver package's doc
	// says: callers need not know dlock's.
	if _, err := c.RWMutex("rw").RLock(context.Background()); !errors.Is(err, dlock.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("RLock on a driver without queues: %v, want dlock.ErrUnsupported and errors.ErrUnsupported", err)
	}
	outer, err := c.Lock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Unlock(context.Background())
	for name, call := range map[string]func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error){"Lock": c.Lock, "TryLock": c.TryLock} {
		if l, err := call(outer.Context(), "k", dlock.WithFIFO()); l != nil || !errors.Is(err, dlock.ErrUnsupported) {
			t.Errorf("nested %s WithFIFO on a driver without queues: lease %v, err %v; want ErrUnsupported", name, l, err)
		}
	}
}

// plainOnly hides every optional interface of a driver.
type plainOnly struct{ driver.Driver }

// Without grant notifications (the subscription fails), a waiter learns of
// its grant from its own renewal: within one renewal interval (TTL/3).
func TestFairLockLostNotification(t *testing.T) {
	drv := memdriver.New()
	drv.SetFault(func(_ context.Context, op string) error {
		if op == memdriver.OpWatchGrants {
			return errors.New("no pub/sub today")
		}
		return nil
	})
	holder, err := dlock.New(drv.Connect(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	ctx := leasecheck.Context(t, 10*time.Second)
	h, err := holder.Lock(ctx, "k", dlock.WithFIFO())
	if err != nil {
		t.Fatal(err)
	}
	// The holder's TTL (the default 30 s) keeps the head's poke out of the
	// way; the waiter's renewal comes every TTL/3 = 1 s.
	const ttl = 3 * time.Second
	out := make(chan fairResult, 1)
	fairWaiter(ctx, waiter, "k", 1, out, dlock.WithTTL(ttl))
	waitWaiters(t, drv, "k", 1)
	start := time.Now()
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took := time.Since(start); took > ttl/3+500*time.Millisecond {
		t.Errorf("waiter without notifications got the lock after %v, want within about TTL/3 = %v", took, ttl/3)
	}
	if r.lease.Token() <= h.Token() {
		t.Errorf("token %d not above %d", r.lease.Token(), h.Token())
	}
	_ = r.lease.Unlock(ctx)
}

// An enqueue whose reply is lost leaves nothing behind: neither a waiter's
// place nor a grant blocks the key once Lock has returned the error.
func TestFairLockLostReplyCleanup(t *testing.T) {
	drv := memdriver.New()
	var fail atomic.Bool
	drv.SetFaultAfter(func(_ context.Context, op string) error {
		if op == memdriver.OpEnqueue && fail.CompareAndSwap(true, false) {
			return errors.New("reply lost")
		}
		return nil
	})
	other, err := dlock.New(drv.Connect(), dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := leasecheck.Context(t, 10*time.Second)

	// The name is free: the lost reply was a grant.
	fail.Store(true)
	if _, err := c.Lock(ctx, "free", dlock.WithFIFO()); !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("Lock with its reply lost: %v, want ErrBackend", err)
	}
	l, err := other.Lock(ctx, "free", dlock.WithFIFO())
	if err != nil {
		t.Fatalf("the lost grant still blocks the key: %v", err)
	}
	// The name is held: the lost reply was a place in the queue.
	fail.Store(true)
	if _, err := c.Lock(ctx, "free", dlock.WithFIFO()); !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("Lock with its reply lost: %v, want ErrBackend", err)
	}
	waitWaiters(t, drv, "free", 0)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if info, ok, err := drv.InspectQueue(ctx, "free"); err != nil || ok {
		t.Fatalf("left in the store: %+v %v", info, err)
	}
}

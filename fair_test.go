package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// queueInspector returns a Redis driver for looking at queues directly.
func queueInspector(t *testing.T, rdb redis.UniversalClient) driver.Inspector {
	t.Helper()
	d, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitWaiters waits until key has n waiters in the store.
func waitWaiters(t *testing.T, q driver.Inspector, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _, err := q.InspectQueue(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters after 10s, want %d", key, len(info.Waiters), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

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

// Twenty waiters on four Clients get the lock in the order they arrived at
// the store, each from the previous holder's Unlock, with strictly
// increasing tokens.
func TestFairLockFIFOOrder(t *testing.T) {
	srv := redisserver.Start(t)
	q := queueInspector(t, srv.Client(t))
	clients := make([]*dlock.Client, 4)
	for i := range clients {
		clients[i] = leasecheck.NewLocker(t, srv.Addr())
	}
	ctx := leasecheck.Context(t, 60*time.Second)
	const key = "fifo"
	first, err := clients[0].Lock(ctx, key, dlock.WithFIFO())
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	out := make(chan fairResult, n)
	for i := range n {
		fairWaiter(ctx, clients[i%len(clients)], key, i, out)
		waitWaiters(t, q, key, i+1)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	prev := first.Token()
	for want := range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("waiter %d: %v", r.who, r.err)
		}
		if r.who != want {
			t.Fatalf("grant %d went to waiter %d", want, r.who)
		}
		if r.lease.Token() <= prev {
			t.Fatalf("grant %d: token %d not above %d", want, r.lease.Token(), prev)
		}
		prev = r.lease.Token()
		if err := r.lease.Unlock(ctx); err != nil {
			t.Fatalf("waiter %d: Unlock: %v", r.who, err)
		}
	}
	if info, ok, err := q.InspectQueue(ctx, key); err != nil || ok {
		t.Fatalf("queue left behind: %+v %v", info, err)
	}
	// Only the records of releases are left (the last one, and the earlier
	// ones each under a key of its own, for retries), each with the TTL its
	// lock had left.
	keys, err := srv.Client(t).Keys(ctx, redisdriver.DefaultPrefix+"{"+key+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k != leasecheck.LockKey(key)+":last" && !strings.HasPrefix(k, leasecheck.LockKey(key)+":r:") {
			t.Errorf("key left: %s", k)
		} else if ttl := srv.Client(t).PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("release record %s without an expiry (PTTL %v)", k, ttl)
		}
	}
}

// A waiter at the head whose process is cut off (it stops renewing) is
// skipped within its TTL: the live waiter behind it gets the lock.
func TestFairLockDeadWaiterAtHead(t *testing.T) {
	srv := redisserver.Start(t)
	q := queueInspector(t, srv.Client(t))
	holder := leasecheck.NewLocker(t, srv.Addr())
	proxy := redisserver.NewProxy(t, srv.Addr())
	dead := leasecheck.NewLockerOn(t, redisserver.NewClient(t, proxy.Addr()), nil)
	live := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const key = "dead-head"
	const ttl = 600 * time.Millisecond
	h, err := holder.Lock(ctx, key, dlock.WithFIFO())
	if err != nil {
		t.Fatal(err)
	}
	deadCtx, cancelDead := context.WithCancel(ctx)
	defer cancelDead()
	out := make(chan fairResult, 2)
	fairWaiter(deadCtx, dead, key, 1, out, dlock.WithTTL(ttl))
	waitWaiters(t, q, key, 1)
	fairWaiter(ctx, live, key, 2, out, dlock.WithTTL(ttl))
	waitWaiters(t, q, key, 2)
	proxy.Blackhole(true) // the head can no longer renew, nor hear of a grant
	start := time.Now()
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		r := <-out
		if r.who == 1 {
			if r.err == nil {
				t.Fatal("the cut-off waiter got the lock")
			}
			continue
		}
		if r.err != nil {
			t.Fatalf("live waiter: %v", r.err)
		}
		// The dead head's place (or the grant it inherited) runs out within
		// one TTL; the live waiter's renewal, every TTL/3, takes it over.
		if took := time.Since(start); took > ttl+ttl/3+500*time.Millisecond {
			t.Errorf("live waiter got the lock after %v, want within about %v", took, ttl+ttl/3)
		}
		if err := r.lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		break
	}
	cancelDead()
	proxy.Blackhole(false)
}

// A waiter whose ctx ends as the lock is handed to it passes the lock on at
// once: the next waiter gets it long before the TTL could run out.
func TestFairLockCancelRacingGrant(t *testing.T) {
	srv := redisserver.Start(t)
	q := queueInspector(t, srv.Client(t))
	a := leasecheck.NewLocker(t, srv.Addr())
	b := leasecheck.NewLocker(t, srv.Addr())
	c := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 60*time.Second)
	const ttl = 10 * time.Second
	won := 0
	for i := range 20 {
		key := fmt.Sprintf("race-%d", i)
		h, err := a.Lock(ctx, key, dlock.WithFIFO(), dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		out := make(chan fairResult, 2)
		fairWaiter(wctx, b, key, 1, out, dlock.WithTTL(ttl))
		waitWaiters(t, q, key, 1)
		fairWaiter(ctx, c, key, 2, out, dlock.WithTTL(ttl))
		waitWaiters(t, q, key, 2)
		start := time.Now()
		// Even rounds cancel as the release is sent; odd rounds after the
		// store granted the lock to the waiter, as its announcement travels.
		if i%2 == 0 {
			go cancel()
		}
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			cancel()
		}
		for range 2 {
			r := <-out
			cancel()
			switch {
			case r.who == 1 && r.err == nil:
				won++ // the grant came first: it is a lease like any other
				if err := r.lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			case r.who == 1 && !errors.Is(r.err, context.Canceled):
				t.Fatalf("cancelled waiter: %v", r.err)
			case r.who == 2:
				if r.err != nil {
					t.Fatal(r.err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Fatalf("round %d: next waiter got the lock after %v (TTL %v)", i, took, ttl)
				}
				if err := r.lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("the waiter took the grant before seeing its cancellation in %d of 20 rounds", won)
}

// A holder cut off past its TTL loses its lease before the store lets it
// go; the head waiter takes the lock over at the store's expiry (its poke
// at RetryAfter), with a greater token.
func TestFairLockHandoffHolderPaused(t *testing.T) {
	srv := redisserver.Start(t)
	q := queueInspector(t, srv.Client(t))
	proxy := redisserver.NewProxy(t, srv.Addr())
	paused := leasecheck.NewLockerOn(t, redisserver.NewClient(t, proxy.Addr()), nil)
	waiter := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const key = "paused"
	const ttl = 600 * time.Millisecond
	h, err := paused.Lock(ctx, key, dlock.WithFIFO(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan fairResult, 1)
	fairWaiter(ctx, waiter, key, 1, out, dlock.WithTTL(10*time.Second))
	waitWaiters(t, q, key, 1)
	proxy.Blackhole(true)
	start := time.Now()
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	took := time.Since(start)
	if h.Err() == nil {
		t.Fatal("the paused holder still reports its lease held after the hand-off")
	}
	if r.lease.Token() <= h.Token() {
		t.Errorf("new holder's token %d not above the paused holder's %d", r.lease.Token(), h.Token())
	}
	if took > ttl+500*time.Millisecond {
		t.Errorf("hand-off %v after the holder was cut off, want within about its TTL %v", took, ttl)
	}
	if err := r.lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(false)
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

// A live waiter keeps its place however long it waits: six of its TTLs
// behind a holder, it is still first, and gets the lock before a waiter
// that came after it.
func TestFairLockLongWaitKeepsPlace(t *testing.T) {
	srv := redisserver.Start(t)
	q := queueInspector(t, srv.Client(t))
	holder := leasecheck.NewLocker(t, srv.Addr())
	a := leasecheck.NewLocker(t, srv.Addr())
	b := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const key = "long-wait"
	const ttl = 450 * time.Millisecond // each renewal has 300 ms of slack on a loaded machine
	h, err := holder.Lock(ctx, key, dlock.WithFIFO())
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan fairResult, 2)
	fairWaiter(ctx, a, key, 1, out, dlock.WithTTL(ttl))
	waitWaiters(t, q, key, 1)
	fairWaiter(ctx, b, key, 2, out, dlock.WithTTL(ttl))
	waitWaiters(t, q, key, 2)
	first, _, err := q.InspectQueue(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * ttl) // the places are renewed every TTL/3 meanwhile
	later, _, err := q.InspectQueue(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(later.Waiters) != 2 || later.Waiters[0].ID != first.Waiters[0].ID || later.Waiters[1].ID != first.Waiters[1].ID {
		t.Fatalf("after 6 TTLs the queue is %+v, was %+v", later.Waiters, first.Waiters)
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{1, 2} {
		r := <-out
		if r.err != nil || r.who != want {
			t.Fatalf("grant went to waiter %d (%v), want %d", r.who, r.err, want)
		}
		if err := r.lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// On Redis a Lock without options waits in the store's queue, in arrival
// order, and is handed the lock by the release; WithoutFIFO waits the
// plain way, with no place in the queue.
func TestRedisLockIsFairByDefault(t *testing.T) {
	srv := redisserver.Start(t)
	holder, a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	l, err := holder.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	first := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return a.Lock(ctx, "k") })
	leasecheck.WaitInQueue(t, holder, "k", 1)
	second := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return b.Lock(ctx, "k") })
	leasecheck.WaitInQueue(t, holder, "k", 2)
	if s := a.Stats(); s.Waiters != 1 {
		t.Fatalf("first waiter's Stats: %+v", s)
	}
	leasecheck.Unlock(t, l)
	la := leasecheck.Receive(t, first, "first waiter")
	if la.Token() <= l.Token() {
		t.Fatalf("handed-off token %d after %d", la.Token(), l.Token())
	}
	select {
	case lb := <-second:
		t.Fatalf("the second waiter got the lock (token %d) while the first holds it", lb.Token())
	default:
	}
	leasecheck.Unlock(t, la)
	leasecheck.Unlock(t, leasecheck.Receive(t, second, "second waiter"))

	// WithoutFIFO: the waiter takes no place in the queue.
	l, err = holder.Lock(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := a.Lock(wctx, "plain", dlock.WithoutFIFO())
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().Waiters != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the plain waiter never waited")
		}
		time.Sleep(time.Millisecond)
	}
	if q, _, err := holder.InspectQueue(ctx, "plain"); err != nil || len(q.Waiters) != 0 {
		t.Fatalf("queue of a plainly awaited lock: %+v, %v", q, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled plain Lock: %v", err)
	}
	leasecheck.Unlock(t, l)
}

// A fixed lease (WithoutWatchdog) handed off by the queue is valid for a
// full TTL from the hand-off, not for what its waiter place had left: the
// place is renewed every TTL/3, so it has between 2/3 and all of a TTL
// left. Each round hands off at another point of that cycle (the place's
// age is what the test is about, so it waits for time to pass).
func TestRedisFairFixedLeaseGetsAFullTTL(t *testing.T) {
	srv := redisserver.Start(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 60*time.Second)
	const ttl = 2 * time.Second
	for i := range 5 {
		l, err := a.Lock(ctx, "fixed")
		if err != nil {
			t.Fatal(err)
		}
		ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) {
			return b.Lock(ctx, "fixed", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
		})
		leasecheck.WaitInQueue(t, a, "fixed", 1)
		time.Sleep(time.Duration(i+1) * ttl / 7)
		leasecheck.Unlock(t, l)
		fixed := leasecheck.Receive(t, ch, "the fixed lease")
		if left := time.Until(fixed.Deadline()); left < ttl*9/10 {
			t.Errorf("round %d: fixed lease valid for %v after the hand-off, want a full TTL (%v, less the drift)", i, left, ttl)
		}
		leasecheck.Unlock(t, fixed)
	}
}

// A lease handed off to a waiter whose replies come 150 ms late (more than
// a third of its TTL) is not lost: its place may have had too little time
// left for a renewal's round trip when the grant was announced, so the
// lease must not simply inherit the place's deadline. Each round hands off
// at another point of the place's renewal cycle and holds the lease for two
// TTLs. Before the fix, the rounds late in the cycle lost their leases.
func TestRedisFairHandoffUnderLatency(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	proxy.SetLatency(150 * time.Millisecond)
	holder := leasecheck.NewLocker(t, srv.Addr())
	slow := leasecheck.NewLockerOn(t, redisserver.NewClient(t, proxy.Addr()), nil)
	ctx := leasecheck.Context(t, 60*time.Second)
	const ttl = 400 * time.Millisecond
	// Renew a lease once first, so that Redis has the driver's library:
	// a first FCALL is answered "not found", then FUNCTION LOAD and FCALL
	// again, two more round trips.
	warm, err := holder.Lock(ctx, "warm-up", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	for d := warm.Deadline(); warm.Deadline().Equal(d); {
		time.Sleep(time.Millisecond)
	}
	leasecheck.Unlock(t, warm)
	for i := range 11 {
		l, err := holder.Lock(ctx, "lagged")
		if err != nil {
			t.Fatal(err)
		}
		ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) {
			return slow.Lock(ctx, "lagged", dlock.WithTTL(ttl))
		})
		leasecheck.WaitInQueue(t, holder, "lagged", 1)
		time.Sleep(time.Duration(i) * ttl / 30) // the phase of the place's renewals
		leasecheck.Unlock(t, l)
		got := leasecheck.Receive(t, ch, "the lagged waiter")
		select {
		case <-got.Done():
			t.Errorf("round %d: the handed-off lease was lost within two TTLs: %v", i, context.Cause(got.Context()))
		case <-time.After(2 * ttl):
		}
		leasecheck.Unlock(t, got)
	}
}

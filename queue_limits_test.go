package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/memdriver"
)

// queueClients returns two Clients of one store per driver the test runs
// on: a real Redis server, and the in-memory driver.
func queueClients(t *testing.T, opts ...dlock.Option) map[string][2]*dlock.Client {
	t.Helper()
	srv := redisserver.Start(t)
	mem := memdriver.New()
	newMem := func() *dlock.Client {
		c, err := dlock.New(mem.Connect(), append([]dlock.Option{dlock.WithLogger(leasecheck.QuietLogger())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return map[string][2]*dlock.Client{
		"redis": {leasecheck.NewLocker(t, srv.Addr(), opts...), leasecheck.NewLocker(t, srv.Addr(), opts...)},
		"mem":   {newMem(), newMem()},
	}
}

// A semaphore's N is the name's while its permits are held: a handle with
// another N is refused, by TryAcquire and by Acquire at once, and gets in
// with its N once the name is idle.
func TestSemaphoreLimitIsTheNames(t *testing.T) {
	for name, cs := range queueClients(t) {
		t.Run(name, func(t *testing.T) {
			ctx := leasecheck.Context(t, 10*time.Second)
			one, many := cs[0].Semaphore("sem", 1), cs[1].Semaphore("sem", 100)
			p, err := one.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l, err := many.TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) || !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Fatalf("TryAcquire with N=100 while a permit of N=1 is held: %v, %v; want ErrLimitMismatch", l, err)
			}
			if l, err := many.Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
				t.Fatalf("Acquire with N=100 while a permit of N=1 is held: %v, %v; want ErrLimitMismatch", l, err)
			}
			if err := p.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			q, err := many.Acquire(ctx)
			if err != nil {
				t.Fatalf("Acquire with N=100 once the name is idle: %v", err)
			}
			if l, err := one.TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
				t.Fatalf("TryAcquire with N=1 under the new N=100: %v, %v; want ErrLimitMismatch", l, err)
			}
			_ = q.Unlock(ctx)
		})
	}
}

// A queued acquisition that finds the queue at its cap fails at once with
// ErrQueueFull (and ErrNotAcquired, not ErrBackend), per call
// (WithMaxWaiters) and by the Client's default (WithDefaultMaxWaiters),
// which a call may lift with WithMaxWaiters(0).
func TestQueueCap(t *testing.T) {
	for name, cs := range queueClients(t, dlock.WithDefaultMaxWaiters(1)) {
		t.Run(name, func(t *testing.T) {
			ctx := leasecheck.Context(t, 20*time.Second)
			a, b := cs[0], cs[1]
			held, err := a.Lock(ctx, "k", dlock.WithFIFO())
			if err != nil {
				t.Fatal(err)
			}
			waitCtx, stop := context.WithCancel(ctx)
			defer stop()
			queued := make(chan error, 1)
			go func() {
				l, err := b.Lock(waitCtx, "k", dlock.WithFIFO())
				if err == nil {
					err = l.Unlock(context.Background())
				}
				queued <- err
			}()
			leasecheck.WaitInQueue(t, a, "k", 1)
			full := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, dlock.ErrQueueFull) || !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, dlock.ErrBackend) {
					t.Errorf("%s with one waiter queued and a cap of 1: %v; want ErrQueueFull and ErrNotAcquired, not ErrBackend", what, err)
				}
			}
			_, err = a.Lock(ctx, "k", dlock.WithFIFO())
			full("Lock (the Client's cap)", err)
			_, err = a.RWMutex("k").Lock(ctx, dlock.WithMaxWaiters(1))
			full("RWMutex.Lock", err)
			_, err = a.Lock(ctx, "k", dlock.WithFIFO(), dlock.WithMaxWaiters(5), dlock.WithMaxWaiters(1))
			full("Lock (the call's cap)", err)
			if _, err := a.Lock(ctx, "k", dlock.WithMaxWaiters(-1)); !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Errorf("WithMaxWaiters(-1): %v, want ErrInvalidArgument", err)
			}
			// No cap for this call: it waits, second in the queue.
			second := make(chan error, 1)
			go func() {
				l, err := a.Lock(waitCtx, "k", dlock.WithFIFO(), dlock.WithMaxWaiters(0))
				if err == nil {
					err = l.Unlock(context.Background())
				}
				second <- err
			}()
			leasecheck.WaitInQueue(t, a, "k", 2)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for _, ch := range []chan error{queued, second} {
				if err := <-ch; err != nil {
					t.Errorf("a waiter within its cap: %v", err)
				}
			}
		})
	}
	if _, err := dlock.New(memdriver.New().Connect(), dlock.WithDefaultMaxWaiters(-1)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithDefaultMaxWaiters(-1): %v, want ErrInvalidArgument", err)
	}
}

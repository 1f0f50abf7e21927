package dlock_test

// The store's queue that the fair lock, RWMutex and Semaphore wait in, on a
// real redis-server (and, where noted, on the in-memory store too).

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

// BenchmarkSharedUncontended is one acquire+release cycle of each queued
// primitive on a free name, next to Client.Lock, on one loopback
// redis-server: ns/op, the server's time per cycle (redis-µs/op, from INFO
// commandstats) and the client's round trips per cycle (trips/op; the
// first cycle's subscription is amortised away).
func BenchmarkSharedUncontended(b *testing.B) {
	srv := redisserver.Start(b)
	admin := srv.Client(b)
	var trips tripCounter
	rdb := redisserver.NewClient(b, srv.Addr())
	rdb.AddHook(&trips)
	c := leasecheck.NewLockerOn(b, rdb, nil)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		take func() (*dlock.Lease, error)
	}{
		{"lock", func() (*dlock.Lease, error) { return c.Lock(ctx, "bench-lock") }},
		{"rlock", func() (*dlock.Lease, error) { return c.RWMutex("bench-rw").RLock(ctx) }},
		{"wlock", func() (*dlock.Lease, error) { return c.RWMutex("bench-rw").Lock(ctx) }},
		{"permit", func() (*dlock.Lease, error) { return c.Semaphore("bench-sem", 4).Acquire(ctx) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			before, t0 := serverUsec(b, admin), trips.n.Load()
			for b.Loop() {
				l, err := bc.take()
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((serverUsec(b, admin)-before)/float64(b.N), "redis-µs/op")
			b.ReportMetric(float64(trips.n.Load()-t0)/float64(b.N), "trips/op")
		})
	}
}

package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// tripCounter counts the requests a go-redis client sends: a pipeline
// counts once, as it is one round trip.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
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

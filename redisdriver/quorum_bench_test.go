package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// BenchmarkQuorumCycle is a serial Lock and Unlock on a Quorum of 5 local
// masters, through a dlock Client (the bench module compares it with
// redsync; docs/benchmarks.md):
//
//	go test -run '^$' -bench QuorumCycle ./redisdriver/
func BenchmarkQuorumCycle(b *testing.B) {
	clients := make([]redis.UniversalClient, 5)
	for i := range clients {
		clients[i] = redisserver.Start(b).Client(b)
	}
	q, err := NewQuorum(clients, WithRestartDelay(0))
	if err != nil {
		b.Fatal(err)
	}
	c, err := dlock.New(q, dlock.WithDefaultTTL(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(); _ = q.Close() })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.Lock(ctx, "k")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

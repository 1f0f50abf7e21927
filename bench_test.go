package dlock_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// BenchmarkLockUnlock measures one TryLock+Unlock cycle on an uncontended
// key: two round trips to a loopback redis-server.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redisserver.Start(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryLock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel runs cycles on distinct keys from
// GOMAXPROCS×4 goroutines sharing one Client (and its connection pool).
func BenchmarkLockUnlockParallel(b *testing.B) {
	srv := redisserver.Start(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		key := "bench:" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() && cycle(b, c.TryLock, key) {
		}
	})
}

// BenchmarkLockContended has goroutines with a Client each (separate
// processes, in effect) Lock one key, so each cycle includes a wake-up by
// release notification.
func BenchmarkLockContended(b *testing.B) {
	srv := redisserver.Start(b)
	lockers := make([]*dlock.Client, 2*runtime.GOMAXPROCS(0))
	for i := range lockers {
		lockers[i] = leasecheck.NewLocker(b, srv.Addr())
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		c := lockers[next.Add(1)-1]
		for pb.Next() && cycle(b, c.Lock, "contended") {
		}
	})
}

// cycle takes and releases key once, reporting false on failure.
func cycle(b *testing.B, lock func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error), key string) bool {
	ctx := context.Background()
	l, err := lock(ctx, key)
	if err == nil {
		err = l.Unlock(ctx)
	}
	if err != nil {
		b.Error(err)
		return false
	}
	return true
}

// BenchmarkRawFloor is the floor BenchmarkLockUnlock is compared with: a
// bare SET NX PX and a compare-and-delete script, nothing else.
func BenchmarkRawFloor(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := redisserver.NewClient(b, srv.Addr())
	ctx := context.Background()
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := rdb.SetNX(ctx, "raw", "me", dlock.DefaultTTL).Result(); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := del.Run(ctx, rdb, []string{"raw"}, "me").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

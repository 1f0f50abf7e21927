package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A held lock is one key, and once its TTL has passed — after a release or
// after it expired unreleased — the name leaves nothing behind: no
// counter or marker outlives the lock.
func TestNoKeyOutlivesTheTTL(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	dbsize := func() int64 {
		n, err := rdb.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const ttl = 100 * time.Millisecond
	for _, released := range []bool{true, false} {
		mustAcquireTTL(t, d, "k", "a", ttl)
		if n := dbsize(); n != 1 {
			t.Fatalf("released=%v: %d keys while the lock is held, want 1", released, n)
		}
		if released {
			mustRelease(t, d, "k", "a")
		}
		// Redis reclaims expired keys lazily or in its expiry cycle (ten
		// times a second), so poll for a bounded time.
		eventually(t, ttl+5*time.Second, "keys gone after the TTL", func() bool { return dbsize() == 0 })
	}
}

package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// failoverBound is how long after a replica's promotion the tests accept
// locks on its slots to fail. The target is 2 s (docs/reliability.md has
// the measured times); the bound leaves room for a loaded machine, and is
// still far below the minute go-redis takes to reload its layout alone.
const failoverBound = 10 * time.Second

// failoverTTL is the TTL of the lease held across a failover: short, so
// that the test sees it renewed on the promoted replica soon, long enough
// to outlast the time without a master on a loaded machine (a node
// timeout of 1 s, then the replica's election: about 2 to 3 s).
const failoverTTL = 10 * time.Second

// After kill -9 of a Cluster master whose replica has its writes, and the
// replica's promotion: a lock on the master's slots can be taken again
// within failoverBound of the promotion, the lease held across the
// failover is renewed on the new master, still valid, and released, and
// the two waiters queued for it behind take it in turn. Both through
// clients made by Open, and through ClusterClients with go-redis's
// defaults handed to New.
func TestClusterFailover(t *testing.T) {
	discard := dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	clients := []struct {
		name string
		open func(t *testing.T, addrs []string) *dlock.Client
	}{
		{"Open", func(t *testing.T, addrs []string) *dlock.Client {
			c, err := redisdriver.Open("redis+cluster://"+strings.Join(addrs, ","), discard)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"New", func(t *testing.T, addrs []string) *dlock.Client {
			return newLockerOn(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}))
		}},
	}
	for _, tc := range clients {
		t.Run(tc.name, func(t *testing.T) {
			cl := redisserver.StartReplicatedCluster(t, 3, time.Second)
			testFailover(t, cl, tc.open(t, cl.Addrs()), tc.open(t, cl.Addrs()))
		})
	}
}

// testFailover runs the failover with c, which holds the lease, and w,
// whose two waiters queue for it.
func testFailover(t *testing.T, cl *redisserver.ReplicatedCluster, c, w *dlock.Client) {
	ctx := ctxTimeout(t, 2*time.Minute)
	const held = "failover:held"
	shard := cl.Shard(t, lockKey(held))
	other := nameOnShard(t, cl, shard, "failover:other:")

	l := got(t)(c.TryLock(ctx, held, dlock.WithTTL(failoverTTL)))
	var waiters []<-chan *dlock.Lease
	for n := range 2 {
		waiters = append(waiters, acquired(t, func() (*dlock.Lease, error) { return w.Lock(ctx, held) }))
		waitInQueue(t, c, held, n+1)
	}
	cl.WaitReplicated(t, shard)
	old := cl.Masters[shard].Client(t)
	before, err := old.PExpireTime(ctx, lockKey(held)).Result()
	if err != nil {
		t.Fatal(err)
	}
	cl.Masters[shard].Kill()
	killed := time.Now()
	promoted := cl.WaitPromoted(t, shard, 30*time.Second)
	t.Logf("replica promoted %v after the kill", promoted.Sub(killed).Round(time.Millisecond))

	// (a) A lock on the failed master's slots works again.
	lockWorksAgain(ctx, t, c, other, promoted)

	// (b) The lease held across the failover is renewed on the new master,
	// and its release works there.
	promotedClient := cl.Replicas[shard].Client(t)
	renewedOn(ctx, t, promotedClient, l, before, promoted)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost across the failover: %v", err)
	}

	// (c) The queued waiters kept their places, and take the lock in turn
	// as it is released.
	prev := l
	for n, ch := range waiters {
		unlock(t, prev)
		released := time.Now()
		next := receive(t, ch, fmt.Sprintf("waiter %d", n+1))
		t.Logf("waiter %d has the lock %v after the release", n+1, time.Since(released).Round(time.Millisecond))
		if next.Token() <= prev.Token() {
			t.Errorf("waiter %d: token %d not above %d", n+1, next.Token(), prev.Token())
		}
		prev = next
	}
	unlock(t, prev)
	if isHeld(t, promotedClient, held) {
		t.Fatal("released lock still in the store")
	}
}

// lockWorksAgain tries TryLock of name with c until it works, and fails
// the test if it has not within failoverBound of promoted.
func lockWorksAgain(ctx context.Context, t *testing.T, c *dlock.Client, name string, promoted time.Time) {
	t.Helper()
	var fails int
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := c.TryLock(cctx, name)
		cancel()
		if err == nil {
			t.Logf("TryLock works %v after the promotion (%d failed before)",
				time.Since(promoted).Round(time.Millisecond), fails)
			unlock(t, l)
			return
		}
		if !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("TryLock %q: %v", name, err)
		}
		fails++
		if time.Since(promoted) > failoverBound {
			t.Fatalf("TryLock %q still fails %v after the promotion (%d failures): %v",
				name, time.Since(promoted).Round(time.Millisecond), fails, err)
		}
		time.Sleep(10 * time.Millisecond) // between attempts, not a synchronisation
	}
}

// renewedOn waits until the new master rdb has l's key with an expiry
// later than before (its expiry when the old master died): a renewal
// reached it. It fails the test after failoverTTL.
func renewedOn(ctx context.Context, t *testing.T, rdb *redis.Client, l *dlock.Lease, before time.Duration, promoted time.Time) {
	t.Helper()
	deadline := time.Now().Add(failoverTTL)
	for {
		after, err := rdb.PExpireTime(ctx, lockKey(l.Key())).Result()
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			t.Logf("lease renewed on the new master %v after the promotion", time.Since(promoted).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not renewed on the new master within %v (expiry %d ms, before the kill %d ms; lease: %v)",
				failoverTTL, after.Milliseconds(), before.Milliseconds(), l.Err())
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// lockKey is the key of the lock name, with the default prefix.
func lockKey(name string) string { return redisdriver.DefaultPrefix + "{" + name + "}" }

// nameOnShard returns the first lock name prefix<n> whose key lives on the
// given shard of cl.
func nameOnShard(t *testing.T, cl *redisserver.ReplicatedCluster, shard int, prefix string) string {
	t.Helper()
	for n := range 1000 {
		name := fmt.Sprintf("%s%d", prefix, n)
		if cl.Shard(t, lockKey(name)) == shard {
			return name
		}
	}
	t.Fatalf("no name %s<n> on shard %d", prefix, shard)
	return ""
}

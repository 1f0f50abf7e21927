package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// On one server LockAll is one command (the atomic script) however many
// keys, Unlock one round trip; each lock has its own increasing token and
// excludes other Clients.
func TestLockAllRedisOneCommand(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	keys := []string{"order:1", "order:2", "order:3", "order:4"}
	warm, err := a.LockAll(ctx, keys) // caches the script
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	before := commandCalls(t, rdb)
	m, err := a.LockAll(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	// One EVALSHA, which ran one MGET, TIME and a SET per key inside.
	after := commandCalls(t, rdb)
	want := map[string]int{"evalsha": 1, "mget": 1, "time": 1, "set": len(keys), "info": 1}
	for name, n := range after {
		if d := n - before[name]; d != want[name] {
			t.Errorf("LockAll of %d keys: %d calls of %s, want %d", len(keys), d, name, want[name])
		}
	}
	for _, k := range keys {
		if m.Token(k) <= warm.Token(k) {
			t.Errorf("%s: token %d after %d", k, m.Token(k), warm.Token(k))
		}
		if _, err := b.TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("%s held by a MultiLease, TryLock of another Client: %v", k, err)
		}
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if leasecheck.IsHeld(t, rdb, k) {
			t.Errorf("%s held after Unlock", k)
		}
	}
}

// On a real server, atomic and one by one: many goroutines on several
// Clients naming overlapping key sets in random orders all finish, and no
// key is held twice.
func TestLockAllRedisNoDeadlock(t *testing.T) {
	srv := redisserver.Start(t)
	keys := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name string
		wrap func(driver.Driver) driver.Driver
	}{
		{"atomic", nil},
		{"one-by-one", func(d driver.Driver) driver.Driver { return oneByOne{d} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clients []*dlock.Client
			for range 4 {
				clients = append(clients, leasecheck.NewLockerOn(t, redisserver.NewClient(t, srv.Addr()), tc.wrap))
			}
			hammerLockAll(t, clients, keys, 16, 25, 90*time.Second)
		})
	}
}

// On a 3-node Cluster: keys sharing a hash tag are taken in one step on
// one node, others one by one across nodes; both exclude other Clients,
// and neither deadlocks under contention.
func TestLockAllCluster(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	newClient := func() *redis.ClusterClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	}
	probeClient := newClient()
	t.Cleanup(func() { _ = probeClient.Close() })
	probe, err := redisdriver.New(probeClient)
	if err != nil {
		t.Fatal(err)
	}
	sameSlot := []string{"{order:7}:items", "{order:7}:payment", "{order:7}:shipping"}
	crossSlot := []string{"user:1", "user:2", "user:3", "user:4", "user:5"}
	if !probe.Atomic(sameSlot) || probe.Atomic(crossSlot) {
		t.Fatalf("Atomic: same slot %v, cross slot %v", probe.Atomic(sameSlot), probe.Atomic(crossSlot))
	}
	var clients []*dlock.Client
	for range 3 {
		clients = append(clients, leasecheck.NewLockerOn(t, newClient(), nil))
	}
	ctx := leasecheck.Context(t, 30*time.Second)
	for _, keys := range [][]string{sameSlot, crossSlot} {
		m, err := clients[0].LockAll(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if _, err := clients[1].TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("%s held by a MultiLease, TryLock of another Client: %v", k, err)
			}
		}
		if _, err := clients[1].TryLockAll(ctx, keys[1:]); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLockAll of held keys: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		infos, err := probe.List(ctx, "")
		if err != nil || len(infos) != 0 {
			t.Fatalf("after Unlock: %d locks held, err %v", len(infos), err)
		}
	}
	t.Run("same-slot", func(t *testing.T) { hammerLockAll(t, clients, sameSlot, 12, 20, 90*time.Second) })
	t.Run("cross-slot", func(t *testing.T) { hammerLockAll(t, clients, crossSlot, 12, 20, 90*time.Second) })
}

// A waiter on the one-by-one path holds the keys before the busy one and
// waits under the one deadline; the release of the busy key, on another
// node, wakes it.
func TestLockAllClusterWaits(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	newClient := func() *redis.ClusterClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}) }
	a, b := leasecheck.NewLockerOn(t, newClient(), nil), leasecheck.NewLockerOn(t, newClient(), nil)
	ctx := leasecheck.Context(t, 30*time.Second)
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = fmt.Sprintf("job:%d", i)
	}
	busy, err := b.Lock(ctx, keys[5])
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		m, err := a.LockAll(ctx, keys)
		if err == nil {
			err = m.Unlock(context.Background())
		}
		got <- err
	}()
	// The waiter takes job:0..4 first: wait until it holds job:4.
	for {
		l, err := b.TryLock(ctx, keys[4])
		if errors.Is(err, dlock.ErrNotAcquired) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
		select {
		case <-time.After(5 * time.Millisecond): // polling for the waiter's progress
		case <-ctx.Done():
			t.Fatal("LockAll never took job:4")
		}
	}
	if err := busy.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("LockAll not woken by the release of job:5")
	}
}

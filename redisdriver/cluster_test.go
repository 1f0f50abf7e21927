package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

func newClusterLocker(t *testing.T, nodes []*redisserver.Server) (*dlock.Client, *redisdriver.Driver) {
	t.Helper()
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	newClient := func() *redis.ClusterClient { return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}) }
	inspect := newClient()
	t.Cleanup(func() { _ = inspect.Close() })
	drv, err := redisdriver.New(inspect)
	if err != nil {
		t.Fatal(err)
	}
	return newLockerOn(t, newClient()), drv
}

// On a 3-node Cluster: exclusion, renewal of leases spread over many slots
// (grouped per slot in one pipeline), waiting woken across nodes, listing
// across masters.
func TestCluster(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	a, drv := newClusterLocker(t, nodes)
	b, _ := newClusterLocker(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	// Renewals every TTL/3 must keep 40 leases on three nodes, also on a
	// loaded machine: 600 ms leaves each round 400 ms of slack.
	const ttl = 600 * time.Millisecond

	var leases []*dlock.Lease
	for i := range 40 {
		key := fmt.Sprintf("order:%d", i)
		l, err := a.TryLock(ctx, key, dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryLock(ctx, key); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: second TryLock: %v", key, err)
		}
		leases = append(leases, l)
	}
	// Several renewal rounds must keep all of them.
	select {
	case <-time.After(3 * ttl):
	case <-leases[0].Done():
	}
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("%s lost on cluster: %v", l.Key(), l.Err())
		}
	}
	infos, err := drv.List(ctx, "order:")
	if err != nil || len(infos) != len(leases) {
		t.Fatalf("List: %d locks, err %v; want %d", len(infos), err, len(leases))
	}

	// A waiter in b is woken by a's release, whichever nodes the lock and
	// the pub/sub connection live on.
	for _, l := range leases[:5] {
		got := make(chan error, 1)
		go func() {
			l2, err := b.Lock(ctx, l.Key(), dlock.WithTTL(30*time.Second))
			if err == nil {
				err = l2.Unlock(ctx)
			}
			got <- err
		}()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range leases[5:] {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if infos, _ := drv.List(context.Background(), ""); len(infos) != 0 {
		t.Fatalf("%d locks left", len(infos))
	}
}

// On a 3-node Cluster, hand-offs of keys in many slots reach waiters on
// other Clients (grants are announced from the node of each key's slot).
func TestClusterFairLock(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	a, _ := newClusterLocker(t, nodes)
	b, _ := newClusterLocker(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range 10 {
		key := fmt.Sprintf("fair:%d", i)
		h := got(t)(a.Lock(ctx, key, dlock.WithFIFO()))
		ch := acquired(t, func() (*dlock.Lease, error) { return b.Lock(ctx, key, dlock.WithFIFO()) })
		waitInQueue(t, a, key, 1)
		unlock(t, h)
		l := receive(t, ch, key+" waiter")
		if l.Token() <= h.Token() {
			t.Errorf("%s: token %d not above %d", key, l.Token(), h.Token())
		}
		unlock(t, l)
	}
}

// On a 3-node Cluster: readers share and exclude a writer, permits are
// counted, and waiters are woken, on names spread over the slots.
func TestClusterRWMutexAndSemaphore(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	a, _ := newClusterLocker(t, nodes)
	b, _ := newClusterLocker(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	for i := range 6 {
		rw := fmt.Sprintf("rw:%d", i)
		r1 := got(t)(a.RWMutex(rw).RLock(ctx))
		r2 := got(t)(b.RWMutex(rw).RLock(ctx))
		if _, err := b.RWMutex(rw).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: TryLock under readers: %v", rw, err)
		}
		wch := acquired(t, func() (*dlock.Lease, error) { return b.RWMutex(rw).Lock(ctx) })
		unlock(t, r1)
		notYet(t, wch, rw+" writer")
		unlock(t, r2)
		unlock(t, receive(t, wch, rw+" writer"))

		sem := fmt.Sprintf("sem:%d", i)
		p1 := got(t)(a.Semaphore(sem, 2).Acquire(ctx))
		p2 := got(t)(b.Semaphore(sem, 2).Acquire(ctx))
		if _, err := a.Semaphore(sem, 2).TryAcquire(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: third permit: %v", sem, err)
		}
		pch := acquired(t, func() (*dlock.Lease, error) { return a.Semaphore(sem, 2).Acquire(ctx) })
		unlock(t, p1)
		p3 := receive(t, pch, sem+" waiter")
		unlock(t, p2)
		unlock(t, p3)
	}
}

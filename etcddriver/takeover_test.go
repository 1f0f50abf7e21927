package etcddriver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A fair waiter that joined behind another, and became the head when that
// one gave up, takes over a crashed holder's lock when etcd deletes the
// holder's key at its lease's expiry: the waiter's Driver watches the key,
// and a deletion no hand-off follows within handoffGrace gets a queue step.
// Before, nothing ran on the deletion, and the grant came with the next
// queue step, a waiter's poke (sent one holder TTL after its enqueue,
// later than the holder's expiry by up to one of the holder's renewal
// intervals) or its place's renewal: 313–415 ms late with a 3 s TTL, up
// to TTL/3 in general.
func TestFairLockCrashedHolderTakenOverByTheNewHead(t *testing.T) {
	m := member(t)
	admin := etcdserver.Client(t, m.Addr())
	holderCli := etcdserver.Client(t, m.Addr())
	holder, d := rootClient(t, holderCli)
	first, _ := rootClient(t, admin)
	second, _ := rootClient(t, admin)
	const name, ttl = "crash", 3 * time.Second
	ctx := ctxT(t)
	start := time.Now()
	if _, err := holder.Lock(ctx, name, dlock.WithFIFO(), dlock.WithTTL(ttl)); err != nil {
		t.Fatal(err)
	}
	// Deletion of the holder's key, as etcd reports it.
	deleted := make(chan time.Time, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wch := admin.Watch(wctx, d.lockKey(name), clientv3.WithFilterPut())
	go func() {
		for resp := range wch {
			if len(resp.Events) > 0 {
				deleted <- time.Now()
				return
			}
		}
	}()
	firstCtx, giveUp := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := first.Lock(firstCtx, name, dlock.WithFIFO(), dlock.WithTTL(ttl))
		gaveUp <- err
	}()
	waitQueue(t, d, name, 1)
	time.Sleep(time.Until(start.Add(ttl / 5)))
	got := make(chan granted, 1)
	go func() {
		l, err := second.Lock(ctx, name, dlock.WithFIFO(), dlock.WithTTL(ttl))
		got <- granted{2, l, err}
	}()
	waitQueue(t, d, name, 2)
	if time.Since(start) >= ttl/3 {
		t.Skipf("the waiters took %v to queue: the holder renewed before its crash, which the test needs it not to", time.Since(start))
	}
	_ = holderCli.Close() // the holder crashes: never renewed or released again
	giveUp()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first waiter, cancelled: %v", err)
	}
	late, at, g := deletedThenGranted(t, deleted, got, ttl)
	t.Logf("key deleted %v after the acquisition; the new head got the lock %v later", at.Sub(start).Round(time.Millisecond), late.Round(time.Millisecond))
	// The grace, then one queue step (a read and a Txn) and the grant's
	// announcement, on a loaded machine.
	if bound := handoffGrace + 200*time.Millisecond; late > bound {
		t.Errorf("the new head got the lock %v after etcd deleted the crashed holder's key, want within %v", late.Round(time.Millisecond), bound)
	}
	_ = g.lease.Unlock(ctx)
}

// A writer queued behind a reader that crashes takes the lock about
// handoffGrace after etcd deletes the reader's key at its lease's expiry,
// and a permit waiter likewise behind a crashed permit holder. The
// waiter's Driver tells the expiry from a release by the release marker a
// release writes in the same revision. Before, the grant came with the
// next queue step, up to TTL/3 later (about 1 s after the deletion here).
func TestCrashedReaderOrPermitHolderTakenOver(t *testing.T) {
	// The waiter's place renews every waiterTTL/3, and each renewal is a
	// queue step: a long one keeps them out of the window measured.
	const ttl, waiterTTL = 3 * time.Second, 30 * time.Second
	for _, c := range []struct {
		name       string
		hold, wait func(c *dlock.Client, ctx context.Context, name string) (*dlock.Lease, error)
	}{
		{"reader", func(c *dlock.Client, ctx context.Context, name string) (*dlock.Lease, error) {
			return c.RWMutex(name).RLock(ctx, dlock.WithTTL(ttl))
		}, func(c *dlock.Client, ctx context.Context, name string) (*dlock.Lease, error) {
			return c.RWMutex(name).Lock(ctx, dlock.WithTTL(waiterTTL))
		}},
		{"permit", func(c *dlock.Client, ctx context.Context, name string) (*dlock.Lease, error) {
			return c.Semaphore(name, 1).Acquire(ctx, dlock.WithTTL(ttl))
		}, func(c *dlock.Client, ctx context.Context, name string) (*dlock.Lease, error) {
			return c.Semaphore(name, 1).Acquire(ctx, dlock.WithTTL(waiterTTL))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := member(t)
			admin := etcdserver.Client(t, m.Addr())
			holderCli := etcdserver.Client(t, m.Addr())
			holder, d := rootClient(t, holderCli)
			waiter, wd := rootClient(t, admin)
			name := "crash-" + c.name
			ctx := ctxT(t)
			if _, err := c.hold(holder, ctx, name); err != nil {
				t.Fatal(err)
			}
			deleted := make(chan time.Time, 1)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			wch := admin.Watch(wctx, d.holderPrefix(name), clientv3.WithPrefix(), clientv3.WithFilterPut())
			go func() {
				for resp := range wch {
					if len(resp.Events) > 0 {
						deleted <- time.Now()
						return
					}
				}
			}()
			got := make(chan granted, 1)
			go func() {
				l, err := c.wait(waiter, ctx, name)
				got <- granted{1, l, err}
			}()
			waitQueue(t, d, name, 1)
			_ = holderCli.Close() // the holder crashes: never renewed or released again
			late, _, g := deletedThenGranted(t, deleted, got, ttl)
			t.Logf("the waiter got the lock %v after etcd deleted the crashed %s's key", late.Round(time.Millisecond), c.name)
			if bound := handoffGrace + 200*time.Millisecond; late > bound {
				t.Errorf("the waiter got the lock %v after the deletion, want within %v", late.Round(time.Millisecond), bound)
			}
			// One step, the expiry watch's; none if the waiter's own poke,
			// sent one holder TTL after its enqueue, came after the deletion
			// and granted first (the poke usually comes before: etcd deletes
			// an expired key up to half a second late).
			if n := wd.expiry.steps.Load(); n > 1 {
				t.Errorf("the waiter's Driver took %d queue steps for the expiry, want at most 1", n)
			}
			_ = g.lease.Unlock(ctx)
		})
	}
}

// deletedThenGranted waits for the first deletion reported on deleted
// (within two TTLs) and then for got's grant, and returns how long after
// the deletion the grant came, and when the deletion was.
func deletedThenGranted(t *testing.T, deleted <-chan time.Time, got <-chan granted, ttl time.Duration) (late time.Duration, at time.Time, g granted) {
	t.Helper()
	select {
	case at = <-deleted:
	case <-time.After(2 * ttl):
		t.Fatal("the crashed holder's key was not deleted within two TTLs")
	}
	g = <-got
	if g.err != nil {
		t.Fatal(g.err)
	}
	return time.Since(at), at, g
}

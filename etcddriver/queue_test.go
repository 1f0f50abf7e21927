package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rootClient is a dlock Client on its own Driver (same prefix as every
// other in t, so they share the locks) over cli.
func rootClient(t *testing.T, cli *clientv3.Client) (*dlock.Client, *Driver) {
	t.Helper()
	d := newDriver(t, cli)
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, d
}

// waitQueue waits until name has want waiters and returns what it saw.
func waitQueue(t *testing.T, d *Driver, name string, want int) driver.QueueInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _, err := d.InspectQueue(ctxT(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == want {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters after 10s, want %d (%+v)", name, len(info.Waiters), want, info)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type granted struct {
	who   int
	lease *dlock.Lease
	err   error
}

// A fair lock taken through the root API on a real etcd: waiters, each on
// its own Client, are granted in the order they arrived, one at a time,
// with increasing fencing tokens; a plain TryLock never jumps the queue.
func TestFairLockArrivalOrder(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	const name, n = "fair", 5
	holder, d := rootClient(t, cli)
	first, err := holder.Lock(ctxT(t), name, dlock.WithFIFO(), dlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan granted, n)
	for i := range n {
		c, _ := rootClient(t, cli)
		go func() {
			l, err := c.Lock(ctxT(t), name, dlock.WithFIFO(), dlock.WithTTL(2*time.Second))
			got <- granted{i, l, err}
		}()
		waitQueue(t, d, name, i+1) // i arrived before i+1 is started
	}
	other, _ := rootClient(t, cli)
	if _, err := other.TryLock(ctxT(t), name); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("plain TryLock with %d queued: %v, want ErrNotAcquired", n, err)
	}
	if err := first.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	prev := first.Token()
	for want := range n {
		var g granted
		select {
		case g = <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d not granted within 10s", want)
		}
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.who, g.err)
		}
		if g.who != want {
			t.Fatalf("granted waiter %d, want %d (arrival order)", g.who, want)
		}
		if g.lease.Token() <= prev {
			t.Errorf("waiter %d: token %d not above the previous holder's %d", g.who, g.lease.Token(), prev)
		}
		prev = g.lease.Token()
		select {
		case g2 := <-got:
			t.Fatalf("waiter %d granted while %d holds", g2.who, g.who)
		default:
		}
		if err := g.lease.Unlock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := d.InspectQueue(ctxT(t), name); err != nil || ok {
		t.Errorf("queue after everyone left: ok %v err %v", ok, err)
	}
}

// RWMutex and Semaphore on a real etcd: readers share and keep the writer
// out, the writer keeps readers out, and at most N permits are held.
func TestRWMutexAndSemaphore(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	a, d := rootClient(t, cli)
	b, _ := rootClient(t, cli)
	w, _ := rootClient(t, cli)
	checkRWMutex(t, d, a, b, w)
	checkSemaphore(t, d, a, b, w)
}

// checkRWMutex: readers on a and b share and keep w's writer out, and the
// writer, granted once both left, keeps readers out.
func checkRWMutex(t *testing.T, d *Driver, a, b, w *dlock.Client) {
	t.Helper()
	const rw = "rw"
	r1, err := a.RWMutex(rw).RLock(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.RWMutex(rw).TryRLock(ctxT(t))
	if err != nil {
		t.Fatalf("second reader: %v, want shared", err)
	}
	if _, err := w.RWMutex(rw).TryLock(ctxT(t)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("writer TryLock under readers: %v, want ErrNotAcquired", err)
	}
	wrote := make(chan granted, 1)
	go func() {
		l, err := w.RWMutex(rw).Lock(ctxT(t))
		wrote <- granted{0, l, err}
	}()
	waitQueue(t, d, rw, 1)
	if _, err := b.RWMutex(rw).TryRLock(ctxT(t)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("reader behind a queued writer: %v, want ErrNotAcquired", err)
	}
	if err := r1.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-wrote:
		t.Fatalf("writer granted while a reader holds: %+v", g)
	default:
	}
	if err := r2.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var wl *dlock.Lease
	select {
	case g := <-wrote:
		if g.err != nil {
			t.Fatal(g.err)
		}
		wl = g.lease
	case <-time.After(10 * time.Second):
		t.Fatal("writer not granted within 10s of the readers' release")
	}
	if wl.Token() <= r2.Token() {
		t.Errorf("writer token %d not above the readers' %d", wl.Token(), r2.Token())
	}
	if _, err := a.RWMutex(rw).TryRLock(ctxT(t)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("reader under the writer: %v, want ErrNotAcquired", err)
	}
	if err := wl.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// checkSemaphore: a and b hold the 2 permits, w's third waits in the queue
// and is granted when one is released.
func checkSemaphore(t *testing.T, d *Driver, a, b, w *dlock.Client) {
	t.Helper()
	const sem, n = "sem", 2
	var held []*dlock.Lease
	for _, c := range []*dlock.Client{a, b} {
		l, err := c.Semaphore(sem, n).TryAcquire(ctxT(t))
		if err != nil {
			t.Fatalf("permit %d of %d: %v", len(held)+1, n, err)
		}
		held = append(held, l)
	}
	if _, err := w.Semaphore(sem, n).TryAcquire(ctxT(t)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("permit %d of %d: %v, want ErrNotAcquired", n+1, n, err)
	}
	third := make(chan granted, 1)
	go func() {
		l, err := w.Semaphore(sem, n).Acquire(ctxT(t))
		third <- granted{0, l, err}
	}()
	info := waitQueue(t, d, sem, 1)
	if len(info.Holders) != n {
		t.Errorf("semaphore holders %d, want %d", len(info.Holders), n)
	}
	if err := held[0].Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-third:
		if g.err != nil {
			t.Fatal(g.err)
		}
		held[0] = g.lease
	case <-time.After(10 * time.Second):
		t.Fatal("queued permit not granted within 10s of a release")
	}
	if info, _, err := d.InspectQueue(ctxT(t), sem); err != nil || len(info.Holders) != n {
		t.Errorf("semaphore holders after the hand-off: %+v %v, want %d", info.Holders, err, n)
	}
	for _, l := range held {
		if err := l.Unlock(context.WithoutCancel(ctxT(t))); err != nil {
			t.Fatal(err)
		}
	}
}

// The queue ranges of two names never overlap, even when one name is a
// prefix of the other: a waiter of "a/b" does not keep "a" busy.
func TestQueueRangesOfPrefixNames(t *testing.T) {
	d := newDriver(t, etcdserver.Client(t, member(t).Addr()))
	ttl := 30 * time.Second
	id, _ := acquireOK(t, d, "a/b", ttl)
	res, err := d.Enqueue(ctxT(t), driver.QueueRequest{Key: "a/b", ID: "w1", TTL: ttl,
		Mode: driver.ModeExclusive, Wait: true, Inbox: "inbox"})
	if err != nil || !res.Queued {
		t.Fatalf("Enqueue behind a holder: %+v, %v; want queued", res, err)
	}
	acquireOK(t, d, "a", ttl)
	if r, err := d.Acquire(ctxT(t), driver.AcquireRequest{Key: "a/b", ID: "other", TTL: ttl}); err != nil || r.Acquired {
		t.Fatalf("Acquire of a name with a waiter: %+v, %v; want refused", r, err)
	}
	if _, err := d.Release(ctxT(t), releaseReq("a/b", id)); err != nil {
		t.Fatal(err)
	}
	info, ok, err := d.InspectQueue(ctxT(t), "a/b")
	if err != nil || !ok || len(info.Holders) != 1 || info.Holders[0].ID != "w1" || len(info.Waiters) != 0 {
		t.Fatalf("after the holder's release: %+v ok %v err %v; want w1 holding", info, ok, err)
	}
}

// AcquireAll takes MaxAtomic locks in one Txn on a real etcd (two
// compares per lock stay within etcd's default limit) and Atomic refuses
// one more.
func TestAcquireAllMaxAtomic(t *testing.T) {
	d := newDriver(t, etcdserver.Client(t, member(t).Addr()))
	reqs := make([]driver.AcquireRequest, MaxAtomic)
	keys := make([]string, MaxAtomic)
	for i := range reqs {
		keys[i] = fmt.Sprintf("all%d", i)
		reqs[i] = driver.AcquireRequest{Key: keys[i], ID: fmt.Sprintf("id%d", i), TTL: 30 * time.Second}
	}
	res, err := d.AcquireAll(ctxT(t), reqs)
	if err != nil || !res.Acquired {
		t.Fatalf("AcquireAll of %d: %+v, %v", MaxAtomic, res, err)
	}
	if d.Atomic(append(keys, "one-more")) {
		t.Errorf("Atomic of %d keys: true, want false", MaxAtomic+1)
	}
}

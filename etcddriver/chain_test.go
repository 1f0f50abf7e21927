package etcddriver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// headWatched reports whether d's Driver follows name with a head watch.
func headWatched(d *Driver, name string) bool {
	d.expiry.mu.Lock()
	defer d.expiry.mu.Unlock()
	return d.expiry.names[name] != nil
}

// waitHeads waits until exactly the Drivers ds[i] with want[i] follow name
// with a head watch.
func waitHeads(t *testing.T, ds []*Driver, name string, want []bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		for i, d := range ds {
			ok = ok && headWatched(d, name) == want[i]
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			got := make([]bool, len(ds))
			for i, d := range ds {
				got[i] = headWatched(d, name)
			}
			t.Fatalf("head watches of %q: %v after 10s, want %v", name, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Of the Clients waiting in one name's queue, only the head's Driver
// follows the name (its lock key, holders and release markers); the
// others follow the waiter ahead of theirs. So a release and its hand-off
// reach one waiting Client, not every one; when the head is granted, the
// next waiter's Driver takes the watch over.
func TestOnlyTheHeadFollowsTheName(t *testing.T) {
	m := member(t)
	holder, _ := rootClient(t, etcdserver.Client(t, m.Addr()))
	ctx := ctxT(t)
	l, err := holder.Lock(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	ds := make([]*Driver, n)
	leases := make(chan *dlock.Lease, n)
	for i := range n {
		c, d := rootClient(t, etcdserver.Client(t, m.Addr()))
		ds[i] = d
		go func() {
			l, err := c.Lock(ctx, "n", dlock.WithFIFO())
			if err != nil {
				t.Error(err)
			}
			leases <- l
		}()
		waitQueue(t, ds[0], "n", i+1) // in this order
	}
	want := make([]bool, n)
	for head := range n {
		clear(want)
		want[head] = true
		waitHeads(t, ds, "n", want)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l = <-leases
	}
	waitHeads(t, ds, "n", make([]bool, n))
	_ = l.Unlock(ctx)
}

// Under contention a fair lock's cycle is three Txns, however many
// Clients wait: the Enqueue (which queues at once), the release (which
// reads the queue) and the hand-off (which grants the head).
func TestContendedCycleRoundTrips(t *testing.T) {
	m := member(t)
	const clients, rounds = 6, 20
	var counters []*rpcCounter
	cs := make([]*dlock.Client, clients)
	for i := range cs {
		cli, rc := countingClient(t, m.Addr())
		counters = append(counters, rc)
		cs[i], _ = rootClient(t, cli)
	}
	ctx := ctxT(t)
	cycle := func(i int) {
		l, err := cs[i].Lock(ctx, "hot", dlock.WithFIFO())
		if err != nil {
			t.Error(err)
			return
		}
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	for i := range cs { // the leases, grant watches
		cycle(i)
	}
	take := func() map[string]int {
		sum := map[string]int{}
		for _, rc := range counters {
			for k, v := range rc.take() {
				sum[k] += v
			}
		}
		return sum
	}
	take()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cs {
		wg.Go(func() {
			for range rounds {
				cycle(i)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	got := take()
	cycles := clients * rounds
	if txn := float64(got["Txn"]) / float64(cycles); txn > 3.2 {
		t.Errorf("%d contended cycles on %d Clients: %.2f Txn per cycle (%v), want at most 3", cycles, clients, txn, got)
	}
	if ka, most := got["LeaseKeepAlive"], clients*(1+int(took/keepAliveReuse)); ka > most {
		t.Errorf("%d keep-alives in %v, want at most %d", ka, took, most)
	}
	t.Logf("%d cycles in %v: %v", cycles, took.Round(time.Millisecond), got)
}

// When the head waiter leaves the queue, the next waiter's Driver follows
// the name instead: a holder's expiry then grants that waiter within a
// moment, not at its next renewal (TTL/3).
func TestNextWaiterTakesTheWatchOver(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	holder, hd := rootClient(t, cli)
	ctx := ctxT(t)
	if _, err := holder.Lock(ctx, "n", dlock.WithTTL(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	first, fd := rootClient(t, etcdserver.Client(t, m.Addr()))
	second, sd := rootClient(t, etcdserver.Client(t, m.Addr()))
	fctx, cancel := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Lock(fctx, "n", dlock.WithTTL(30*time.Second), dlock.WithFIFO())
		firstDone <- err
	}()
	waitQueue(t, hd, "n", 1)
	secondDone := make(chan error, 1)
	go func() {
		l, err := second.Lock(ctx, "n", dlock.WithTTL(30*time.Second), dlock.WithFIFO())
		if err == nil {
			err = l.Unlock(ctx)
		}
		secondDone <- err
	}()
	waitQueue(t, hd, "n", 2)
	waitHeads(t, []*Driver{fd, sd}, "n", []bool{true, false})
	cancel()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first waiter, cancelled: %v", err)
	}
	waitHeads(t, []*Driver{fd, sd}, "n", []bool{false, true})
	// The holder's key goes as an expiry takes it: deleted, with no
	// release marker and no hand-off.
	start := time.Now()
	if _, err := cli.Delete(ctx, hd.lockKey("n")); err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the second waiter was granted %v after the holder's key went, want well under TTL/3 (10s)", took)
	}
}

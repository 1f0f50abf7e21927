package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// noQueueLister hides the in-memory driver's ListQueues (and everything
// else but the plain lock).
type noQueueLister struct{ driver.Driver }

func TestListQueues(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 10*time.Second)
	r := leasecheck.Got(t)(c.RWMutex("q/rw").RLock(ctx))
	p := leasecheck.Got(t)(c.Semaphore("q/pool", 1).Acquire(ctx))
	plain := leasecheck.Got(t)(c.TryLock(ctx, "q/plain"))
	waiting := make(chan *dlock.Lease, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		l, _ := c.Semaphore("q/pool", 1).Acquire(wctx)
		waiting <- l
	}()
	leasecheck.WaitInQueue(t, c, "q/pool", 1)

	infos, err := c.ListQueues(ctx, "q/")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Key != "q/pool" || infos[1].Key != "q/rw" {
		t.Fatalf("ListQueues = %+v; want q/pool then q/rw (not the plain lock)", infos)
	}
	pool, rw := infos[0], infos[1]
	if len(pool.Holders) != 1 || pool.Holders[0].ID != p.ID() || pool.Holders[0].Mode != driver.ModePermit ||
		len(pool.Waiters) != 1 || pool.Waiters[0].Limit != 1 {
		t.Errorf("q/pool = %+v; want the permit %s and one waiter for 1 permit", pool, p.ID())
	}
	if len(rw.Holders) != 1 || rw.Holders[0].ID != r.ID() || rw.Holders[0].Mode != driver.ModeShared || len(rw.Waiters) != 0 {
		t.Errorf("q/rw = %+v; want the reader %s", rw, r.ID())
	}
	if infos, err := c.ListQueues(ctx, "q/r"); err != nil || len(infos) != 1 || infos[0].Key != "q/rw" {
		t.Errorf("ListQueues(q/r) = %+v, %v; want q/rw", infos, err)
	}

	stop()
	if l := <-waiting; l != nil {
		t.Fatalf("the cancelled waiter got a permit")
	}
	// Its place is given up in the background: wait for it, or the
	// permit released below would pass to it for a moment.
	leasecheck.WaitInQueue(t, c, "q/pool", 0)
	leasecheck.Unlock(t, r)
	leasecheck.Unlock(t, p)
	leasecheck.Unlock(t, plain)
	if infos, err := c.ListQueues(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("ListQueues after everyone left = %+v, %v; want none", infos, err)
	}

	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.ListQueues(nil, ""); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("ListQueues(nil ctx) = %v, want ErrInvalidArgument", err)
	}
	bare, err := dlock.New(noQueueLister{memdriver.New()}, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if _, err := bare.ListQueues(ctx, ""); !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("ListQueues on a driver without it = %v, want ErrUnsupported", err)
	}
	_ = c.Close()
	if _, err := c.ListQueues(context.Background(), ""); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("ListQueues after Close = %v, want ErrClosed", err)
	}
}

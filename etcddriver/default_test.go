package etcddriver

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// On etcd, as on Redis, a Lock without options takes a place in the
// queue (the driver queues by default: an uncontended cycle through the
// queue costs what a plain one does); WithoutFIFO waits the plain way.
func TestLockIsFairByDefault(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	newClient := func() *dlock.Client {
		c, err := dlock.New(d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder, waiter := newClient(), newClient()
	ctx := ctxT(t)
	l, err := holder.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	for _, tc := range []struct {
		name   string
		opts   []dlock.LockOption
		queued int
	}{
		{"default", nil, 1},
		{"WithoutFIFO", []dlock.LockOption{dlock.WithoutFIFO()}, 0},
	} {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Lock(wctx, "job", tc.opts...)
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for waiter.Stats().Waiters != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the waiter never waited", tc.name)
			}
			time.Sleep(time.Millisecond)
		}
		q, _, err := holder.InspectQueue(ctx, "job")
		if err != nil || len(q.Waiters) != tc.queued {
			t.Errorf("%s: queue %+v, %v; want %d waiters", tc.name, q, err, tc.queued)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: cancelled Lock: %v", tc.name, err)
		}
		// A cancelled waiter's place is released in the background: the
		// next case counts only its own.
		for {
			q, _, err := holder.InspectQueue(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if len(q.Waiters) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cancelled waiter's place is still queued: %+v", tc.name, q)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A writer that waits is not overtaken by readers arriving after it, and
// those readers enter together once it is done.
func TestRWMutexWriterIsNotOvertaken(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := leasecheck.Context(t, 20*time.Second)
	m := c.RWMutex("doc")
	r1 := leasecheck.Got(t)(m.RLock(ctx))
	wch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.Lock(ctx) })
	leasecheck.WaitInQueue(t, c, "doc", 1)
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock with a writer queued: %v, want ErrNotAcquired", err)
	}
	r2ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	r3ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	leasecheck.WaitInQueue(t, c, "doc", 3)
	leasecheck.NotYet(t, wch, "writer behind a reader")
	leasecheck.Unlock(t, r1)
	w := leasecheck.Receive(t, wch, "writer")
	leasecheck.NotYet(t, r2ch, "reader behind the writer")
	leasecheck.NotYet(t, r3ch, "reader behind the writer")
	leasecheck.Unlock(t, w)
	r2, r3 := leasecheck.Receive(t, r2ch, "reader 2"), leasecheck.Receive(t, r3ch, "reader 3")
	if r2.Token() < w.Token() || r3.Token() < w.Token() {
		t.Fatalf("readers after write %d: tokens %d %d, want at least the write's", w.Token(), r2.Token(), r3.Token())
	}
	leasecheck.Unlock(t, r2)
	leasecheck.Unlock(t, r3)
}

// Waiters are served in arrival order.
func TestSemaphoreServesInArrivalOrder(t *testing.T) {
	c, _ := newMemClient(t, nil)
	semaphoreServesInArrivalOrder(t, c)
}

func TestRedisSemaphoreServesInArrivalOrder(t *testing.T) {
	srv := redisserver.Start(t)
	semaphoreServesInArrivalOrder(t, leasecheck.NewLocker(t, srv.Addr()))
}

func semaphoreServesInArrivalOrder(t *testing.T, c *dlock.Client) {
	ctx := leasecheck.Context(t, 20*time.Second)
	s := c.Semaphore("fifo", 1)
	holder := leasecheck.Got(t)(s.Acquire(ctx))
	var chans []<-chan *dlock.Lease
	for i := range 4 {
		chans = append(chans, leasecheck.Acquired(t, func() (*dlock.Lease, error) { return s.Acquire(ctx) }))
		leasecheck.WaitInQueue(t, c, "fifo", i+1)
	}
	leasecheck.Unlock(t, holder)
	for i, ch := range chans {
		l := leasecheck.Receive(t, ch, "waiter")
		for _, later := range chans[i+1:] {
			leasecheck.NotYet(t, later, "a later waiter")
		}
		leasecheck.Unlock(t, l)
	}
}

package dlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// A writer that waits is not overtaken by readers arriving after it, and
// those readers enter together once it is done.
func TestRWMutexWriterIsNotOvertaken(t *testing.T) {
	c, _ := newMemClient(t, nil)
	ctx := ctxTimeout(t, 20*time.Second)
	m := c.RWMutex("doc")
	r1 := got(t)(m.RLock(ctx))
	wch := acquired(t, func() (*dlock.Lease, error) { return m.Lock(ctx) })
	waitInQueue(t, c, "doc", 1)
	if _, err := m.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock with a writer queued: %v, want ErrNotAcquired", err)
	}
	r2ch := acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	r3ch := acquired(t, func() (*dlock.Lease, error) { return m.RLock(ctx) })
	waitInQueue(t, c, "doc", 3)
	notYet(t, wch, "writer behind a reader")
	unlock(t, r1)
	w := receive(t, wch, "writer")
	notYet(t, r2ch, "reader behind the writer")
	notYet(t, r3ch, "reader behind the writer")
	unlock(t, w)
	r2, r3 := receive(t, r2ch, "reader 2"), receive(t, r3ch, "reader 3")
	if r2.Token() < w.Token() || r3.Token() < w.Token() {
		t.Fatalf("readers after write %d: tokens %d %d, want at least the write's", w.Token(), r2.Token(), r3.Token())
	}
	unlock(t, r2)
	unlock(t, r3)
}

// Waiters are served in arrival order.
func TestSemaphoreServesInArrivalOrder(t *testing.T) {
	c, _ := newMemClient(t, nil)
	semaphoreServesInArrivalOrder(t, c)
}

func TestRedisSemaphoreServesInArrivalOrder(t *testing.T) {
	srv := redisserver.Start(t)
	semaphoreServesInArrivalOrder(t, newLocker(t, srv.Addr()))
}

func semaphoreServesInArrivalOrder(t *testing.T, c *dlock.Client) {
	ctx := ctxTimeout(t, 20*time.Second)
	s := c.Semaphore("fifo", 1)
	holder := got(t)(s.Acquire(ctx))
	var chans []<-chan *dlock.Lease
	for i := range 4 {
		chans = append(chans, acquired(t, func() (*dlock.Lease, error) { return s.Acquire(ctx) }))
		waitInQueue(t, c, "fifo", i+1)
	}
	unlock(t, holder)
	for i, ch := range chans {
		l := receive(t, ch, "waiter")
		for _, later := range chans[i+1:] {
			notYet(t, later, "a later waiter")
		}
		unlock(t, l)
	}
}

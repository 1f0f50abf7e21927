package memdriver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// The code under test: a job that must not run on two workers at once.
// A worker that finds the lock busy skips the run; one whose lock expired
// while it worked reports it, so that its caller can undo or check.
type reportJob struct {
	locks driver.Driver
	ttl   time.Duration
}

var errLockLost = errors.New("lock lost while working")

// run takes the lock with acquisition id (random in real code), does
// work, and releases the lock.
func (j reportJob) run(ctx context.Context, id string, work func()) (ran bool, token uint64, err error) {
	res, err := j.locks.Acquire(ctx, driver.AcquireRequest{Key: "report", ID: id, TTL: j.ttl})
	if err != nil || !res.Acquired {
		return false, 0, err
	}
	work()
	rel, err := j.locks.Release(ctx, []driver.ReleaseRequest{{Key: "report", ID: id}})
	if err != nil {
		return true, res.Token, err
	}
	if rel[0] == driver.NotHeld {
		return true, res.Token, errLockLost
	}
	return true, res.Token, nil
}

// fakeClock is moved by the test instead of waiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A unit test of locking code: two workers, one of which stalls past its
// TTL, without a server and without waiting for the TTL.
func Example() {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	drv := memdriver.New(memdriver.WithClock(clock.Now))
	defer drv.Close()
	ctx := context.Background()
	job := reportJob{locks: drv, ttl: time.Minute}

	ranA, tokenA, errA := job.run(ctx, "a-1", func() {
		ranB, _, _ := job.run(ctx, "b-1", func() {})
		fmt.Println("b ran while a held the lock:", ranB)

		clock.Advance(2 * time.Minute) // a stalls past its TTL
		ranB, tokenB, errB := job.run(ctx, "b-2", func() {})
		fmt.Println("b ran once a's lock expired:", ranB, tokenB, errB)
	})
	fmt.Println("a ran:", ranA, tokenA, errA)
	// Output:
	// b ran while a held the lock: false
	// b ran once a's lock expired: true 2 <nil>
	// a ran: true 1 lock lost while working
}

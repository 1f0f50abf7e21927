package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
)

// slowSecondRelease is the Redis driver, whose second Release call waits
// for hold before it is sent: one slow connection among others.
type slowSecondRelease struct {
	*redisdriver.Driver
	calls atomic.Int32
	hold  chan struct{}
}

func (d *slowSecondRelease) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if d.calls.Add(1) == 2 {
		select {
		case <-d.hold:
		case <-ctx.Done():
		}
	}
	return d.Driver.Release(ctx, reqs)
}

// Two Unlock calls of one lease at once both answer nil, and so does every
// later call, also when the lock has moved on in between (handed to a
// waiter, who released it too). Before, the second call sent a release of
// its own; arriving after the waiter's release, it was answered NOT_HELD,
// and that answer replaced the remembered nil.
func TestConcurrentUnlocksAgree(t *testing.T) {
	srv := redisserver.Start(t)
	waiter := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	for _, opts := range [][]dlock.LockOption{nil, {dlock.WithoutFIFO()}} {
		var slow *slowSecondRelease
		holder := leasecheck.NewLockerOn(t, redisserver.NewClient(t, srv.Addr()), func(d driver.Driver) driver.Driver {
			slow = &slowSecondRelease{Driver: d.(*redisdriver.Driver), hold: make(chan struct{})}
			return slow
		})
		l, err := holder.Lock(ctx, "k", opts...)
		if err != nil {
			t.Fatal(err)
		}
		handedOver := make(chan struct{})
		go func() {
			defer close(handedOver)
			if w, err := waiter.Lock(ctx, "k", opts...); err == nil {
				_ = w.Unlock(ctx)
			}
		}()
		go func() { <-handedOver; close(slow.hold) }()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = l.Unlock(ctx) })
		}
		wg.Wait()
		<-handedOver
		later := l.Unlock(ctx)
		for i, err := range append(errs, later) {
			if err != nil {
				t.Errorf("%v: Unlock call %d: %v, want nil (the lock was released)", opts, i+1, err)
			}
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrReleased) {
			t.Errorf("Err after Unlock: %v", err)
		}
	}
}

package memdriver_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// A lost reply: the store releases the lock but the caller sees an error,
// and its retry must be told the release already happened.
func ExampleDriver_SetFaultAfter() {
	drv := memdriver.New()
	defer drv.Close()
	ctx := context.Background()
	if _, err := drv.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}); err != nil {
		panic(err)
	}

	var lose atomic.Bool
	lose.Store(true)
	drv.SetFaultAfter(func(_ context.Context, op string) error {
		if op == memdriver.OpRelease && lose.Swap(false) {
			return errors.New("connection reset")
		}
		return nil
	})

	req := []driver.ReleaseRequest{{Key: "k", ID: "a"}}
	_, err := drv.Release(ctx, req)
	fmt.Println("first try:", err)
	res, err := drv.Release(ctx, req)
	fmt.Println("retry already released:", res[0] == driver.AlreadyReleased, err)
	// Output:
	// first try: connection reset
	// retry already released: true <nil>
}

// A stalled store: the hook blocks until the caller gives up, and the call
// fails with the caller's deadline, having changed nothing.
func ExampleDriver_SetFault() {
	drv := memdriver.New()
	defer drv.Close()
	drv.SetFault(func(ctx context.Context, op string) error {
		<-ctx.Done()
		return ctx.Err()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := drv.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
	fmt.Println(err)

	drv.SetFault(nil)
	res, _ := drv.Acquire(context.Background(), driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second})
	fmt.Println("free afterwards:", res.Acquired)
	// Output:
	// context deadline exceeded
	// free afterwards: true
}

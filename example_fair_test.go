package dlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// Waiters get a fair lock in the order they arrived at the store, each
// handed the lock by the previous holder's Unlock.
func ExampleWithFIFO() {
	drv := memdriver.New()
	locker, err := dlock.New(drv)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	first, err := locker.Lock(ctx, "report", dlock.WithFIFO())
	if err != nil {
		log.Fatal(err)
	}
	order := make(chan string, 2)
	for _, name := range []string{"alice", "bob"} {
		queued := make(chan struct{})
		go func() {
			close(queued) // arrival order is only decided in the store, below
			l, err := locker.Lock(ctx, "report", dlock.WithFIFO())
			if err != nil {
				log.Fatal(err)
			}
			order <- name
			_ = l.Unlock(ctx)
		}()
		<-queued
		waitQueued(drv, "report", name)
	}
	_ = first.Unlock(ctx)
	fmt.Println(<-order, "then", <-order)
	// Output: alice then bob
}

// waitQueued waits until the store shows one more waiter on key (an
// example's stand-in for the time it takes a real request to arrive).
func waitQueued(drv *memdriver.Driver, key, name string) {
	want := map[string]int{"alice": 1, "bob": 2}[name]
	for {
		info, _, err := drv.InspectQueue(context.Background(), key)
		if err != nil {
			log.Fatal(err)
		}
		if len(info.Waiters) == want {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

package dlock_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// An operator's view of every read-write lock and semaphore in use.
func ExampleClient_ListQueues() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	r, err := locker.RWMutex("jobs/catalog").RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Unlock(ctx)
	p, err := locker.Semaphore("jobs/gpu", 2).Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Unlock(ctx)

	queues, err := locker.ListQueues(ctx, "jobs/")
	if err != nil {
		log.Fatal(err)
	}
	for _, q := range queues {
		fmt.Printf("%s: %d holder(s), %v, %d waiting\n", q.Key, len(q.Holders), q.Holders[0].Mode, len(q.Waiters))
	}
	// Output:
	// jobs/catalog: 1 holder(s), shared, 0 waiting
	// jobs/gpu: 1 holder(s), permit, 0 waiting
}

package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/redisdriver"
)

// LockAll takes several locks, all or none, as one lease with a token per
// key. The keys can be named in any order: they are taken in sorted order
// (or in one atomic step where the store can), so two callers never
// deadlock.
func ExampleClient_LockAll() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	transfer, err := locker.LockAll(ctx, []string{"account:9", "account:7"})
	if err != nil {
		log.Fatal(err)
	}
	defer transfer.Unlock(ctx)
	fmt.Println(transfer.Keys(), transfer.Tokens())

	// Another caller, keys in the other order: refused as a whole.
	_, err = locker.TryLockAll(ctx, []string{"account:7", "account:9"})
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))

	// transfer.Context() ends if any of the locks is lost.
	fmt.Println(transfer.Context().Err())
	// Output:
	// [account:7 account:9] map[account:7:1 account:9:2]
	// true
	// <nil>
}

// On Redis, keys that share a hash tag at their start are in one Cluster
// slot, so LockAll takes them in one atomic script call even in a
// Cluster; on a single server any keys are.
func ExampleClient_LockAll_redis() {
	rdb, stop := exampleRedis()
	defer stop()
	drv, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.New(drv)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	keys := []string{"{order:42}:payment", "{order:42}:items"}
	fmt.Println("one atomic step:", drv.Atomic(keys)) // in a Cluster too: one hash tag
	order, err := locker.LockAll(ctx, keys)
	if err != nil {
		log.Fatal(err)
	}
	tokens := order.Tokens()
	fmt.Println(order.Keys(), tokens[keys[0]] > 0 && tokens[keys[1]] > 0)
	if err := order.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// one atomic step: true
	// [{order:42}:items {order:42}:payment] true
}

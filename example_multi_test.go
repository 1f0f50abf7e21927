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

// Reentrancy goes through the context: a function that locks an account
// works alone, and also when its caller already holds the lock and passes
// the lease's Context — then it is a nested hold, with the same fencing
// token and no round trip, and its Unlock leaves the caller's lock held.
func ExampleClient_Lock_reentrant() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	credit := func(ctx context.Context) error {
		lease, err := locker.Lock(ctx, "account:7")
		if err != nil {
			return err
		}
		defer lease.Unlock(ctx)
		fmt.Println("credit: token", lease.Token(), "nested", lease.Nested(), "holds", lease.Holds())
		return nil
	}

	outer, err := locker.Lock(ctx, "account:7")
	if err != nil {
		log.Fatal(err)
	}
	if err := credit(outer.Context()); err != nil { // nested in outer
		log.Fatal(err)
	}
	fmt.Println("outer: token", outer.Token(), "holds", outer.Holds(), "err", outer.Err())
	if err := outer.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := credit(ctx); err != nil { // alone: an acquisition of its own
		log.Fatal(err)
	}
	// Output:
	// credit: token 1 nested true holds 2
	// outer: token 1 holds 1 err <nil>
	// credit: token 2 nested false holds 1
}

// WithoutReentry makes a lock non-reentrant: a Lock under its lease's
// Context fails at once with ErrReentry instead of waiting for a lock its
// own caller holds.
func ExampleWithoutReentry() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()

	lease, err := locker.Lock(ctx, "job", dlock.WithoutReentry())
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	_, err = locker.Lock(lease.Context(), "job")
	fmt.Println(errors.Is(err, dlock.ErrReentry))
	// Output: true
}

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

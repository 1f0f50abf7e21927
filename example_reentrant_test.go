package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
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

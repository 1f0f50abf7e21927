package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// At most N permits are held at once; each permit is a lease of its own.
func ExampleClient_Semaphore() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	encoders := locker.Semaphore("encoders", 2)

	a, err := encoders.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := encoders.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = encoders.TryAcquire(ctx)
	fmt.Println("third of 2:", errors.Is(err, dlock.ErrNotAcquired))

	q, _, err := locker.InspectQueue(ctx, "encoders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("permits held:", len(q.Holders), "- ids differ:", a.ID() != b.ID())

	_ = a.Unlock(ctx)
	c, err := encoders.TryAcquire(ctx)
	fmt.Println("after a release:", err == nil)
	_ = b.Unlock(ctx)
	_ = c.Unlock(ctx)
	// Output:
	// third of 2: true
	// permits held: 2 - ids differ: true
	// after a release: true
}

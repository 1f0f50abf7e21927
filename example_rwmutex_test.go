package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// Readers share a read-write lock; the writer waits for them, and a reader
// that asks for the write lock under its own lease is refused rather than
// left waiting for itself.
func ExampleClient_RWMutex() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	catalog := locker.RWMutex("catalog")

	r1, err := catalog.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := catalog.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_, err = catalog.TryLock(ctx)
	fmt.Println("writer while two read:", errors.Is(err, dlock.ErrNotAcquired))
	_, err = catalog.Lock(r1.Context())
	fmt.Println("upgrade under a read lease:", errors.Is(err, dlock.ErrUpgrade))

	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := catalog.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("write token above the readers':", w.Token() > r1.Token())
	_ = w.Unlock(ctx)
	// Output:
	// writer while two read: true
	// upgrade under a read lease: true
	// write token above the readers': true
}

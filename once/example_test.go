package once_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/once"
)

// Process order 42 once: the second delivery gets the stored result, a
// reused key with another payload an error.
func Example() {
	locker, err := dlock.New(memdriver.New()) // redisdriver.Open(...) in production
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	// once.NewMemStore for tests; redisonce.New or sqlonce.New in production.
	p, err := once.New(locker, once.NewMemStore())
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	charge := func(ctx context.Context, token uint64) ([]byte, error) {
		fmt.Println("charging the card") // pass token to guarded writes
		return []byte("charge ch_1"), nil
	}
	for range 2 { // the queue delivers the message twice
		res, err := p.Do(ctx, "order:42", []byte(`{"amount":1000}`), charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s (replayed: %v)\n", res.Value, res.Replayed)
	}
	_, err = p.Do(ctx, "order:42", []byte(`{"amount":9999}`), charge)
	fmt.Println(errors.Is(err, once.ErrPayloadMismatch))
	// Output:
	// charging the card
	// charge ch_1 (replayed: false)
	// charge ch_1 (replayed: true)
	// true
}

// A failed attempt is retried by the next delivery.
func ExampleProcessor_Do_failure() {
	locker, _ := dlock.New(memdriver.New())
	defer locker.Close()
	p, _ := once.New(locker, once.NewMemStore())
	ctx := context.Background()
	attempts := 0
	ship := func(ctx context.Context, token uint64) ([]byte, error) {
		attempts++
		if attempts == 1 {
			return nil, errors.New("carrier API down")
		}
		return []byte("shipped"), nil
	}
	_, err := p.Do(ctx, "order:7", nil, ship)
	fmt.Println("first delivery:", err)
	res, err := p.Do(ctx, "order:7", nil, ship)
	fmt.Println("second delivery:", string(res.Value), err)
	// Output:
	// first delivery: carrier API down
	// second delivery: shipped <nil>
}

// Duplicates that must not wait: DuplicatesReplay answers a running
// delivery's duplicate with ErrInProgress (Stripe's 409).
func ExampleWithDuplicates() {
	locker, _ := dlock.New(memdriver.New())
	defer locker.Close()
	store := once.NewMemStore()
	p, _ := once.New(locker, store, once.WithDuplicates(once.DuplicatesReplay))
	ctx := context.Background()

	c, _, err := p.Begin(ctx, "payment:9", nil) // the first delivery, still running
	if err != nil {
		log.Fatal(err)
	}
	pay := func(context.Context, uint64) ([]byte, error) { return []byte("paid twice"), nil }
	_, err = p.Do(ctx, "payment:9", nil, pay)
	fmt.Println(errors.Is(err, once.ErrInProgress))
	if err := c.Complete(ctx, []byte("paid")); err != nil {
		log.Fatal(err)
	}
	res, _ := p.Do(ctx, "payment:9", nil, pay)
	fmt.Println(string(res.Value), res.Replayed)
	// Output:
	// true
	// paid true
}

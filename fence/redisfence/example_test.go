package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/memdriver"
	"github.com/redis/go-redis/v9"
)

// Fenced writes to Redis under a lock. The example uses an in-process
// Redis (miniredis) and an in-memory lock, so it runs anywhere; in
// production both are your Redis (the lock through redisdriver).
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	orders, err := redisfence.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	var held fence.Token
	err = fence.Do(ctx, locker, "order:42", func(ctx context.Context, tok fence.Token) error {
		held = tok
		_, err := orders.HSet(ctx, "order:42", tok, map[string]any{"status": "paid"})
		return err
	})
	fmt.Println("err:", err, "status:", rdb.HGet(ctx, "order:42", "status").Val())

	// A write with a token older than the last holder's is refused.
	_, err = orders.HSet(ctx, "order:42", held-1, map[string]any{"status": "refunded"})
	fmt.Println(errors.Is(err, fence.ErrStaleToken), rdb.HGet(ctx, "order:42", "status").Val())
	// Output:
	// err: <nil> status: paid
	// true paid
}

// The high-water mark lives next to the data, in the same Cluster slot.
func ExampleFenceKey() {
	for _, k := range []string{"order:42", "user:{7}:profile"} {
		fk, _ := redisfence.FenceKey(k)
		fmt.Println(k, "→", fk)
	}
	// Output:
	// order:42 → dlock:fence{order:42}
	// user:{7}:profile → dlock:fence:user:{7}:profile
}

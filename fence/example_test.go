package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/memdriver"
)

// The three-line use: lock, guarded write with the lease's token, release.
// Here the lock is in memory (memdriver) and so is the guarded resource
// (Memory); in production the lock comes from redisdriver.Open and the
// guard is the database (sqlfence) or Redis (redisfence).
func ExampleDo() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	orders := fence.NewMemory()
	ctx := context.Background()

	err = fence.Do(ctx, locker, "order:42", func(ctx context.Context, tok fence.Token) error {
		return orders.Apply(ctx, "order:42", tok, func(ctx context.Context) error {
			fmt.Println("order 42 charged")
			return nil
		})
	})
	fmt.Println("err:", err)
	// Output:
	// order 42 charged
	// err: <nil>
}

// A holder that was paused past its lease comes back with an old token:
// the resource has seen a newer one and refuses it.
func ExampleMemory() {
	ctx := context.Background()
	orders := fence.NewMemory()
	write := func(tok fence.Token) error {
		return orders.Apply(ctx, "order:42", tok, func(context.Context) error { return nil })
	}

	fmt.Println(write(7)) // the holder of token 7
	fmt.Println(write(8)) // the next holder, after 7's lease ran out
	err := write(7)       // 7 wakes up from a long pause
	var stale *fence.StaleTokenError
	fmt.Println(errors.Is(err, fence.ErrStaleToken), errors.As(err, &stale) && stale.Highest == 8)
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
	// true true
	// fence: stale fencing token 7 for "order:42": it has seen 8
}

// A resource with its own write path reports a rejected token with Stale,
// so callers can match ErrStaleToken whatever the resource.
func ExampleStale() {
	highest := map[string]fence.Token{"report:2026-12": 12}
	publish := func(name string, tok fence.Token) error {
		if tok < highest[name] {
			return fence.Stale(name, tok, highest[name])
		}
		highest[name] = tok
		return nil
	}
	err := publish("report:2026-12", 11)
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	// Output: true
}

// Run works under a lease the caller manages, for several steps under one
// lock; it does not release.
func ExampleRun() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	lease, err := locker.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)

	for _, step := range []string{"collect", "render"} {
		err := fence.Run(ctx, lease, func(ctx context.Context, tok fence.Token) error {
			fmt.Println(step, "under token", tok == lease.Token())
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// collect under token true
	// render under token true
}

package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// exampleRedis starts an in-process Redis so the examples run anywhere; in
// production, pass your own go-redis client (plain, Sentinel or Cluster).
func exampleRedis() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return rdb, func() { rdb.Close(); mr.Close() }
}

// The quickstart: take a lock, do the work under the lease's context, pass
// the fencing token to the resource, release.
func Example() {
	mr, err := miniredis.Run() // an in-process Redis, so the example runs anywhere
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()

	locker, err := redisdriver.Open("redis://"+mr.Addr(), dlock.WithOwnerMeta("order-service"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Lock(ctx, "order:42")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)

	// lease.Context() is cancelled the moment the lock is lost; the token
	// lets the database reject a write from a holder that was paused past
	// its lease.
	work := func(ctx context.Context, token uint64) error { return ctx.Err() }
	if err := work(lease.Context(), lease.Token()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("processed order 42 under", lease.Key(), "- held:", lease.Err() == nil)
	// Output: processed order 42 under order:42 - held: true
}

// Unit tests of code that takes locks need no Redis: memdriver is an
// in-memory store with the same semantics (TTLs, tokens, notifications).
func ExampleNew_memdriver() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx := context.Background()
	first, _ := locker.TryLock(ctx, "order:42")
	_, err = locker.TryLock(ctx, "order:42")
	fmt.Println("busy while held:", errors.Is(err, dlock.ErrNotAcquired))
	_ = first.Unlock(ctx)
	second, _ := locker.TryLock(ctx, "order:42")
	fmt.Println("next token is higher:", second.Token() > first.Token())
	_ = second.Unlock(ctx)
	// Output:
	// busy while held: true
	// next token is higher: true
}

func ExampleClient_TryLock() {
	rdb, stop := exampleRedis()
	defer stop()
	drv, _ := redisdriver.New(rdb)
	a, _ := dlock.New(drv)
	defer a.Close()
	b, _ := dlock.New(drv)
	defer b.Close()

	ctx := context.Background()
	first, err := a.TryLock(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "report")
	fmt.Println("second try busy:", errors.Is(err, dlock.ErrNotAcquired))

	_ = first.Unlock(ctx)
	second, err := b.TryLock(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tokens increase:", second.Token() > first.Token())
	_ = second.Unlock(ctx)
	// Output:
	// second try busy: true
	// tokens increase: true
}

// A lease ends by itself when the lock is taken away — here an operator
// deletes the key; the holder learns at its next renewal (TTL/3).
func ExampleLease_Done() {
	rdb, stop := exampleRedis()
	defer stop()
	drv, _ := redisdriver.New(rdb)
	locker, _ := dlock.New(drv)
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Lock(ctx, "job", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	rdb.Del(ctx, redisdriver.DefaultPrefix+"{job}")

	<-lease.Done()
	fmt.Println(errors.Is(lease.Err(), dlock.ErrLockLost))
	fmt.Println(lease.Err())
	fmt.Println("unlock:", lease.Unlock(ctx))
	// Output:
	// true
	// dlock: lock lost: the store no longer had it as this lease's (released by force, expired there, or lost with the store's data)
	// unlock: dlock: lock not held
}

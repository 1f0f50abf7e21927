package redisonce_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/redisonce"
	"github.com/redis/go-redis/v9"
)

// Records in Redis: the second delivery is answered from the record. (An
// in-process Redis and in-memory locks, so the example runs anywhere; in
// production both come from your Redis, through redisdriver.)
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

	store, err := redisonce.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	p, err := once.New(locker, store)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		res, err := p.Do(ctx, "order:42", []byte("ship"), func(ctx context.Context, token uint64) ([]byte, error) {
			return []byte("shipped"), nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(res.Value), "replayed:", res.Replayed)
	}
	rec, _, _ := store.Get(ctx, "order:42")
	fmt.Println(rec.State, mr.Exists(redisonce.DefaultPrefix+"order:42"))
	// Output:
	// shipped replayed: false
	// shipped replayed: true
	// completed true
}

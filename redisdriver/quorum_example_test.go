package redisdriver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// OpenQuorum runs dlock over independent Redis masters, Redlock's way,
// with fencing tokens that still strictly increase. The example only
// compiles: it needs servers.
func ExampleOpenQuorum() {
	client, err := redisdriver.OpenQuorum([]string{
		"redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // closes the Redis clients too

	lease, err := client.Lock(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err) // dlock.ErrBackend when fewer than a majority answer
	}
	defer lease.Unlock(context.Background())
	fmt.Println("fencing token", lease.Token())
}

// NewQuorum takes clients the application made, and options of its own.
func ExampleNewQuorum() {
	var clients []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		clients = append(clients, rdb)
	}
	q, err := redisdriver.NewQuorum(clients,
		redisdriver.WithMasterOptions(redisdriver.WithPrefix("myapp:")),
		redisdriver.WithVoteTimeout(100*time.Millisecond),
		// Locks on these masters use TTLs up to a minute.
		redisdriver.WithRestartDelay(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	client, err := dlock.New(q)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	defer q.Close()
}

package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
)

// Open connects a dlock Client to Redis in one call. The example only
// compiles: it needs a server.
func ExampleOpen() {
	client, err := redisdriver.Open("redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // closes the Redis client too

	lease, err := client.Lock(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	fmt.Println("fencing token", lease.Token())
}

// A Cluster (or Sentinel) deployment is named by its URL.
func ExampleParseURL() {
	rdb, err := redisdriver.ParseURL("redis+cluster://127.0.0.1:7000,127.0.0.1:7001")
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	drv, err := redisdriver.New(rdb, redisdriver.WithPrefix("myapp:"))
	if err != nil {
		log.Fatal(err)
	}
	_ = drv // pass to dlock.New
}

// WithReplicaAck makes a lock count only once a replica has it, so that a
// failover to that replica keeps it. The example only compiles: it needs
// a Sentinel deployment.
func ExampleWithReplicaAck() {
	rdb, err := redisdriver.ParseURL("redis+sentinel://127.0.0.1:26379/primary")
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	drv, err := redisdriver.New(rdb, redisdriver.WithReplicaAck(1, 100*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	client, err := dlock.New(drv)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lease, err := client.Lock(context.Background(), "invoice-run")
	if errors.Is(err, redisdriver.ErrReplicaAck) {
		log.Fatal("no replica confirmed the lock: ", err)
	} else if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
}

package etcddriver_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Open connects a dlock Client to an etcd cluster in one call. The example
// only compiles: it needs a cluster.
func ExampleOpen() {
	client, err := etcddriver.Open("10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // closes the etcd client too

	lease, err := client.Lock(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	// The token is the etcd revision that created the lock: pass it to
	// the resource, which rejects lower ones.
	fmt.Println("fencing token", lease.Token())
}

// New takes an etcd client the application already has, and leaves it
// open.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close() // yours to close, after the dlock Client
	drv, err := etcddriver.New(cli, etcddriver.WithPrefix("myapp/locks/"))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.New(drv)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}

package zkdriver_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/zkdriver"
	"github.com/go-zookeeper/zk"
)

// Open connects a dlock Client to a ZooKeeper ensemble in one call. The
// example only compiles: it needs an ensemble.
func ExampleOpen() {
	client, err := zkdriver.Open("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // ends the session too

	lease, err := client.Lock(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	// The token is the zxid that created the lock's node: pass it to the
	// resource, which rejects lower ones.
	fmt.Println("fencing token", lease.Token())
}

// New takes a connection the application already has, and leaves it
// open. It must be told the session timeout the connection was made with.
func ExampleNew() {
	conn, _, err := zk.Connect([]string{"10.0.0.1:2181"}, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close() // yours to close, after the dlock Client
	drv, err := zkdriver.New(conn, zkdriver.WithPrefix("/myapp/locks"), zkdriver.WithSessionTimeout(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.New(drv, dlock.WithDefaultTTL(drv.MaxTTL()))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}

// ParseServers reads the server lists ZooKeeper's own clients take.
func ExampleParseServers() {
	addrs, err := zkdriver.ParseServers("zk1:2181,zk2,[::1]:2182")
	fmt.Println(addrs, err)
	_, err = zkdriver.ParseServers("zk://zk1:2181")
	fmt.Println(err)
	// Output:
	// [zk1:2181 zk2:2181 [::1]:2182] <nil>
	// dlock: invalid argument: ZooKeeper server list "zk://zk1:2181": want host:port,host:port (no scheme, path or spaces)
}

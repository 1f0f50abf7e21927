package redisdriver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/drivertest"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// badKeys are names the KeyChecker rejects (see CheckKey).
var badKeys = []string{"}", "}x", "}{x}"}

// The suite against one real server, restarted empty and from an RDB
// snapshot taken by SAVE.
func TestConformance(t *testing.T) {
	srv := redisserver.Start(t)
	admin := srv.Client(t)
	var n atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			// Each driver its own prefix and client, as unrelated
			// applications sharing a server would have.
			d, err := New(srv.Client(t), WithPrefix(fmt.Sprintf("ct%d:", n.Add(1))))
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Restart: func(t *testing.T, how drivertest.Restart) {
			switch how {
			case drivertest.RestartEmpty:
				srv.RestartEmpty()
			case drivertest.RestartFromSnapshot:
				srv.Kill() // kill -9: nothing written since the SAVE survives
				srv.Restart()
			default:
				t.Fatalf("unknown restart %d", how)
			}
		},
		Snapshot: func(t *testing.T) {
			if err := admin.Save(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		BadKeys: badKeys,
	})
}

// The suite against a real three-node Cluster (no restarts).
func TestConformanceCluster(t *testing.T) {
	addrs := clusterAddrs(redisserver.StartCluster(t, 3))
	var n atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			d, err := New(c, WithPrefix(fmt.Sprintf("ct%d:", n.Add(1))))
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		BadKeys: badKeys,
	})
}

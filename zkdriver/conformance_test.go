package zkdriver

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/drivertest"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
)

// The suite against one standalone server, restarted with kill -9 from
// its data directory: ZooKeeper acknowledges a write once it is logged
// (fsync'd) by a quorum, so a restarted server has every acknowledged
// write, zxids included; an empty restart is an operator's act, not a
// failure (the zxids, and so the tokens, would start again).
func TestConformance(t *testing.T) {
	n := zkserver.Start(t)
	var i atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			return newDriver(t, n.Addr(), fmt.Sprintf("/ct%d", i.Add(1)))
		},
		Restart: func(t *testing.T, how drivertest.Restart) {
			switch how {
			case drivertest.RestartEmpty:
				t.Skip("a ZooKeeper server never restarts empty; an ensemble rebuilt from nothing starts its zxids again (docs/zookeeper.md)")
			case drivertest.RestartFromSnapshot:
				n.Restart()
			default:
				t.Fatalf("unknown restart %d", how)
			}
		},
		Snapshot: func(t *testing.T) {},
	})
}

// The suite against a three-node ensemble, each driver connected to one
// node, so that writes are forwarded to the leader.
func TestConformanceEnsemble(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	var i atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			k := i.Add(1)
			return newDriver(t, e.Nodes[int(k)%len(e.Nodes)].Addr(), fmt.Sprintf("/ct%d", k))
		},
	})
}

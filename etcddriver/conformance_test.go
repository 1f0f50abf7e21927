package etcddriver

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/drivertest"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// The suite against one real member, restarted with kill -9 from its data
// directory.
//
// etcd acknowledges a write only once it is durable (fsync'd by a
// majority), so a member restarted after kill -9 comes back with
// everything it acknowledged: there is no "older state" to restart from,
// and the harness's RestartFromSnapshot is that restart, with the data
// directory as the snapshot. An empty restart (the data directory thrown
// away) is not an etcd failure mode but an operator's: the revision
// counter, and so the tokens, start again from 1 (docs/etcd.md); that
// subtest is skipped.
func TestConformance(t *testing.T) {
	m := etcdserver.Start(t)
	var n atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			// Each driver its own prefix and client, as unrelated
			// applications sharing a cluster would have.
			d, err := New(etcdserver.Client(t, m.Addr()), WithPrefix(fmt.Sprintf("ct%d/", n.Add(1))))
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		Restart: func(t *testing.T, how drivertest.Restart) {
			switch how {
			case drivertest.RestartEmpty:
				t.Skip("an etcd member never restarts empty; a cluster rebuilt from nothing restarts its revisions (docs/etcd.md)")
			case drivertest.RestartFromSnapshot:
				m.Kill()
				m.Restart()
			default:
				t.Fatalf("unknown restart %d", how)
			}
		},
		Snapshot: func(t *testing.T) {}, // the data directory is the snapshot: see above
	})
}

// The suite against a real three-member cluster, each driver's client
// talking to one member only, so that most requests are forwarded to the
// leader as in a real deployment.
func TestConformanceCluster(t *testing.T) {
	c := etcdserver.StartCluster(t, 3)
	var n atomic.Int64
	drivertest.Run(t, drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			i := n.Add(1)
			ep := c.Endpoints()[int(i)%len(c.Members)]
			d, err := New(etcdserver.Client(t, ep), WithPrefix(fmt.Sprintf("ct%d/", i)))
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	})
}

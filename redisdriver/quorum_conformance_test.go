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

// startMasters starts n independent redis-servers.
func startMasters(t *testing.T, n int) []*redisserver.Server {
	t.Helper()
	srvs := make([]*redisserver.Server, n)
	for i := range srvs {
		srvs[i] = redisserver.Start(t)
	}
	return srvs
}

// newQuorum returns a Quorum on clients of its own to srvs, closed with
// the test.
func newQuorum(t *testing.T, srvs []*redisserver.Server, opts ...QuorumOption) *Quorum {
	t.Helper()
	clients := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		clients[i] = s.Client(t)
	}
	q, err := NewQuorum(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The suite against 3 and 5 masters. The store the suite restarts is the
// whole quorum: every master at once, empty or from its snapshot. The
// restarted masters vote at once (WithRestartDelay(0)): the suite's 30 s
// TTL would otherwise keep them out for 30 s; TestQuorumRestartedMaster
// checks the delay.
func TestQuorumConformance(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) {
			srvs := startMasters(t, n)
			var prefixes atomic.Int64
			drivertest.Run(t, drivertest.Harness{
				New: func(t *testing.T) driver.Driver {
					prefix := fmt.Sprintf("qc%d:", prefixes.Add(1))
					return newQuorum(t, srvs, WithRestartDelay(0), WithMasterOptions(WithPrefix(prefix)))
				},
				Restart: func(t *testing.T, how drivertest.Restart) {
					for _, s := range srvs {
						switch how {
						case drivertest.RestartEmpty:
							s.RestartEmpty()
						case drivertest.RestartFromSnapshot:
							s.Kill()
							s.Restart()
						default:
							t.Fatalf("unknown restart %d", how)
						}
					}
				},
				Snapshot: func(t *testing.T) {
					for _, s := range srvs {
						if err := s.Client(t).Save(context.Background()).Err(); err != nil {
							t.Fatal(err)
						}
					}
				},
				BadKeys: badKeys,
			})
		})
	}
}

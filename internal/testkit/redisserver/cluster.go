package redisserver

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartCluster starts n redis-server processes (n ≥ 1) in cluster mode,
// splits the 16384 slots evenly among them, joins them into one cluster and
// waits until every node reports cluster_state:ok. It needs servers started
// by the test, so it skips when DLOCK_TEST_REDIS is set.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	if os.Getenv(EnvAddr) != "" {
		t.Skip("redisserver: a cluster needs servers started by the test")
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = Start(t, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	for i, s := range nodes {
		c := s.Client(t)
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redisserver: assign slots %d-%d to %s: %v", lo, hi, s.Addr(), err)
		}
		if i > 0 {
			if err := c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(nodes[0].Port())).Err(); err != nil {
				t.Fatalf("redisserver: cluster meet: %v", err)
			}
		}
	}
	for _, s := range nodes {
		waitClusterOK(ctx, t, s.Client(t), n)
	}
	return nodes
}

// waitClusterOK polls until the node sees all n nodes and every slot.
func waitClusterOK(ctx context.Context, t testing.TB, c *redis.Client, n int) {
	t.Helper()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redisserver: cluster not ready: %v\n%s", ctx.Err(), info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

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

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// StartCluster starts n redis-server processes (n ≥ 1) in cluster mode,
// splits the 16384 slots evenly among them, joins them into one cluster and
// waits until every node reports cluster_state:ok. It needs servers started
// by the test, so it skips when DLOCK_TEST_REDIS is set.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	nodes := startClusterNodes(t, n, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	formCluster(ctx, t, nodes, nodes)
	return nodes
}

// startClusterNodes starts n redis-server processes in cluster mode, not
// yet joined, with the given cluster-node-timeout and extra arguments.
func startClusterNodes(t testing.TB, n int, nodeTimeout time.Duration, args ...string) []*Server {
	t.Helper()
	if os.Getenv(EnvAddr) != "" {
		t.Skip("redisserver: a cluster needs servers started by the test")
	}
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = Start(t, WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)), WithArgs(args...))
	}
	return nodes
}

// formCluster gives masters[i] the i-th of len(masters) even ranges of
// slots, joins every node of all (masters included) into one cluster and
// waits until each sees all of them and every slot.
func formCluster(ctx context.Context, t testing.TB, masters, all []*Server) {
	t.Helper()
	for i, s := range masters {
		lo, hi := slotRange(i, len(masters))
		if err := s.Client(t).Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redisserver: assign slots %d-%d to %s: %v", lo, hi, s.Addr(), err)
		}
	}
	for _, s := range all[1:] {
		if err := s.Client(t).ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(all[0].Port())).Err(); err != nil {
			t.Fatalf("redisserver: cluster meet: %v", err)
		}
	}
	for _, s := range all {
		waitClusterOK(ctx, t, s.Client(t), len(all))
	}
}

// slotRange is the range of slots StartCluster gives the i-th of n masters.
func slotRange(i, n int) (lo, hi int) {
	return i * clusterSlots / n, (i+1)*clusterSlots/n - 1
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

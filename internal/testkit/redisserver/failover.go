package redisserver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ReplicatedCluster is a Redis Cluster whose masters each have one
// replica, for tests of failover: kill a master (Kill), wait for its
// replica to take over (WaitPromoted), check what clients saw.
type ReplicatedCluster struct {
	// Masters are the nodes that serve the slots at start, in the order of
	// their slot ranges (as StartCluster splits them).
	Masters []*Server
	// Replicas[i] replicates Masters[i].
	Replicas []*Server
}

// StartReplicatedCluster starts a Cluster of masters masters, each with one
// replica, with the given cluster-node-timeout: a master that stops
// answering is replaced by its replica about one to two node timeouts
// later (failure detection, then the replica's election delay). It
// returns once every node sees every other, every replica is in sync with
// its master and every node serves every slot. It skips when
// DLOCK_TEST_REDIS is set.
func StartReplicatedCluster(t testing.TB, masters int, nodeTimeout time.Duration) *ReplicatedCluster {
	t.Helper()
	// A master waits 5 s by default before it sends a new replica its
	// data, for more replicas to share the transfer: none will.
	nodes := startClusterNodes(t, 2*masters, nodeTimeout, "--repl-diskless-sync-delay", "0")
	c := &ReplicatedCluster{Masters: nodes[:masters], Replicas: nodes[masters:]}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	formCluster(ctx, t, c.Masters, nodes)
	for i, r := range c.Replicas {
		id, err := c.Masters[i].Client(t).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("redisserver: CLUSTER MYID of %s: %v", c.Masters[i].Addr(), err)
		}
		if err := r.Client(t).Do(ctx, "CLUSTER", "REPLICATE", id).Err(); err != nil {
			t.Fatalf("redisserver: %s CLUSTER REPLICATE %s: %v", r.Addr(), id, err)
		}
	}
	// A failover needs the replica in sync, and every master to know it as
	// the failed master's replica (they vote for its promotion).
	for _, r := range c.Replicas {
		waitFor(ctx, t, "replica "+r.Addr()+" in sync", func() bool {
			info, err := command(r.Addr(), time.Second, "INFO", "replication")
			return err == nil && infoField(info, "master_link_status") == "up"
		})
	}
	for _, s := range nodes {
		waitFor(ctx, t, s.Addr()+" knowing every replica", func() bool {
			out, err := s.Client(t).ClusterNodes(ctx).Result()
			return err == nil && strings.Count(out, "slave") == masters
		})
		waitClusterOK(ctx, t, s.Client(t), len(nodes))
	}
	return c
}

// Addrs returns the address of every node, masters first: a client's
// seeds.
func (c *ReplicatedCluster) Addrs() []string {
	var addrs []string
	for _, s := range append(append([]*Server(nil), c.Masters...), c.Replicas...) {
		addrs = append(addrs, s.Addr())
	}
	return addrs
}

// Shard returns the index of the master (and replica) that served key's
// slot at start. It asks the first node that answers for the slot.
func (c *ReplicatedCluster) Shard(t testing.TB, key string) int {
	t.Helper()
	for _, s := range append(append([]*Server(nil), c.Masters...), c.Replicas...) {
		reply, err := command(s.Addr(), time.Second, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot, err := strconv.Atoi(reply)
		if err != nil {
			t.Fatalf("redisserver: CLUSTER KEYSLOT %q: %q", key, reply)
		}
		return slot * len(c.Masters) / clusterSlots
	}
	t.Fatalf("redisserver: no node answers CLUSTER KEYSLOT")
	return -1
}

// WaitReplicated waits until Replicas[i] has every write Masters[i] had
// when it was called (their replication offsets), for up to 10 s.
func (c *ReplicatedCluster) WaitReplicated(t testing.TB, i int) {
	t.Helper()
	info, err := command(c.Masters[i].Addr(), time.Second, "INFO", "replication")
	if err != nil {
		t.Fatalf("redisserver: INFO replication of %s: %v", c.Masters[i].Addr(), err)
	}
	want, err := strconv.ParseInt(infoField(info, "master_repl_offset"), 10, 64)
	if err != nil {
		t.Fatalf("redisserver: master_repl_offset of %s: %v", c.Masters[i].Addr(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitFor(ctx, t, "replica "+c.Replicas[i].Addr()+" at offset "+strconv.FormatInt(want, 10), func() bool {
		info, err := command(c.Replicas[i].Addr(), time.Second, "INFO", "replication")
		got, _ := strconv.ParseInt(infoField(info, "slave_repl_offset"), 10, 64)
		return err == nil && got >= want
	})
}

// WaitPromoted polls Replicas[i], every 5 ms for up to within, until it
// reports itself a master, and returns when it first saw that: the moment
// of the promotion, give or take the polling interval.
func (c *ReplicatedCluster) WaitPromoted(t testing.TB, i int, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		info, err := command(c.Replicas[i].Addr(), time.Second, "INFO", "replication")
		if err == nil && infoField(info, "role") == "master" {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("redisserver: replica %s not promoted within %v", c.Replicas[i].Addr(), within)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// waitFor polls cond every 20 ms until it holds, failing the test when ctx
// ends first.
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("redisserver: waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// A release of a lock whose slot is being migrated, while the slot's keys
// are not all on one node, is answered TRYAGAIN (the script does not run):
// the driver tries again, within the caller's ctx, and the release is done
// once the migration has moved the keys, instead of failing and leaving
// the lock held in the store.
func TestReleaseDuringSlotMigration(t *testing.T) {
	nodes := redisserver.StartCluster(t, 2)
	d := newDriver(t, newClusterClient(t, nodes))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("migrating:%d", i); slot(d.lockKey(n)) < 16384/2 {
			name = n // on the first node
		}
	}
	s := int(slot(d.lockKey(name)))
	mustAcquire(t, d, name, "a") // its last released lock does not exist: the keys are split
	src, dst := nodes[0].Client(t), nodes[1].Client(t)
	srcID, dstID := nodeID(ctx, t, src), nodeID(ctx, t, dst)
	for _, c := range []struct {
		rdb   *redis.Client
		state string
		id    string
	}{{dst, "IMPORTING", srcID}, {src, "MIGRATING", dstID}} {
		if err := c.rdb.Do(ctx, "CLUSTER", "SETSLOT", s, c.state, c.id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	refusedBefore := errorCount(ctx, t, src, "TRYAGAIN")

	type result struct {
		res []driver.ReleaseResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := d.Release(ctx, []driver.ReleaseRequest{{Key: name, ID: "a"}})
		done <- result{res, err}
	}()
	// go-redis itself sends a call refused with TRYAGAIN four times in all:
	// more refusals than that are the driver's own retries.
	deadline := time.Now().Add(10 * time.Second)
	for errorCount(ctx, t, src, "TRYAGAIN")-refusedBefore < 6 {
		select {
		case r := <-done:
			t.Fatalf("release answered during the migration: %v, %v", r.res, r.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("release not refused with TRYAGAIN six times")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}

	// The migration ends: the keys move, the slot is the second node's.
	keys, err := src.ClusterGetKeysInSlot(ctx, s, 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(nodes[1].Addr())
	for _, k := range keys {
		if err := src.Migrate(ctx, host, port, k, 0, 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*redis.Client{dst, src} {
		if err := c.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", dstID).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := <-done
	if r.err != nil || len(r.res) != 1 || r.res[0] != driver.Released {
		t.Fatalf("release across the migration: %v, %v; want Released", r.res, r.err)
	}
	if n, err := dst.Exists(ctx, d.lockKey(name)).Result(); err != nil || n != 0 {
		t.Fatalf("lock key on the new node after the release: %d, %v", n, err)
	}
}

// nodeID returns the Cluster node id of the node c talks to.
func nodeID(ctx context.Context, t *testing.T, c *redis.Client) string {
	t.Helper()
	id, err := c.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// errorCount returns how many error replies starting with code the server
// of c has sent (INFO errorstats).
func errorCount(ctx context.Context, t *testing.T, c *redis.Client, code string) int {
	t.Helper()
	info, err := c.Info(ctx, "errorstats").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_"+code+":count="); ok {
			n, _ := strconv.Atoi(rest)
			return n
		}
	}
	return 0
}

package redisdriver

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestSlotMatchesRedisCluster(t *testing.T) {
	// Reference values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"123456789":             12739, // CRC16/XMODEM check value 0x31C3
		"foo":                   12182,
		"{user1000}.following":  slot("user1000"),
		"foo{}{bar}":            slot("foo{}{bar}"), // empty tag: whole key
		"dlock:{order:42}:last": slot("order:42"),
		"dlock:{order:42}":      slot("order:42"),
		"dlock:{a}b}:released":  slot("a"),
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestGroupsBySlotOnlyInCluster(t *testing.T) {
	keys := []string{"a", "b", "a", "c"}
	key := func(i int) string { return keys[i] }
	d := &Driver{prefix: DefaultPrefix}
	if g := d.groupBySlot(len(keys), key); len(g) != 1 || len(g[0]) != 4 {
		t.Fatalf("single node: %v", g)
	}
	d.cluster = newClusterClientForTest()
	defer d.cluster.Close()
	g := d.groupBySlot(len(keys), key)
	if len(g) != 3 || len(g[0]) != 2 || g[0][0] != 0 || g[0][1] != 2 {
		t.Fatalf("cluster groups: %v", g)
	}
}

func newClusterClientForTest() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
}

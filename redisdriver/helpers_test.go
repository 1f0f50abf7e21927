package redisdriver

import (
	"context"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// newDriver returns a Driver on rdb, failing the test on error.
func newDriver(t *testing.T, rdb redis.UniversalClient, opts ...Option) *Driver {
	t.Helper()
	d, err := New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustAcquire(t *testing.T, d *Driver, key, id string) uint64 {
	t.Helper()
	return mustAcquireTTL(t, d, key, id, 10*time.Second)
}

// mustWaitFor has a waiter ask for the held lock key, as a plain Lock
// does before it waits: a refused Acquire with Waiting set, which marks
// the name so that its release is published (note_waiting in lib.lua).
func mustWaitFor(t *testing.T, d *Driver, key string) {
	t.Helper()
	res, err := d.Acquire(context.Background(), driver.AcquireRequest{Key: key, ID: "waiter", TTL: 10 * time.Second, Waiting: true})
	if err != nil || res.Acquired {
		t.Fatalf("waiting acquire of the held %q: %+v, %v", key, res, err)
	}
}

func mustAcquireTTL(t *testing.T, d *Driver, key, id string, ttl time.Duration) uint64 {
	t.Helper()
	res, err := d.Acquire(context.Background(), driver.AcquireRequest{Key: key, ID: id, TTL: ttl})
	if err != nil || !res.Acquired {
		t.Fatalf("acquire %q as %s: %+v, %v", key, id, res, err)
	}
	return res.Token
}

func release(t *testing.T, d *Driver, key, id string) driver.ReleaseResult {
	t.Helper()
	res, err := d.Release(context.Background(), []driver.ReleaseRequest{{Key: key, ID: id}})
	if err != nil || len(res) != 1 {
		t.Fatalf("release %q as %s: %v, %v", key, id, res, err)
	}
	return res[0]
}

func mustRelease(t *testing.T, d *Driver, key, id string) {
	t.Helper()
	if res := release(t, d, key, id); res != driver.Released {
		t.Fatalf("release %q as %s: %v, want Released", key, id, res)
	}
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	calls int
	usec  float64
}

// takeUsec sums Redis' time in the given commands since the last reset of
// its counters, and resets them.
func takeUsec(t testing.TB, rdb redis.Cmdable, cmds ...string) float64 {
	t.Helper()
	stats := commandStats(t, rdb)
	var usec float64
	for _, c := range cmds {
		usec += stats[c].usec
	}
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return usec
}

// commandStats returns Redis' per-command counters. Commands run inside
// scripts are counted under their own names too (and in the script's time).
func commandStats(t testing.TB, rdb redis.Cmdable) map[string]cmdStat {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := make(map[string]cmdStat)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_")), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				s.calls, _ = strconv.Atoi(v)
			case "usec":
				s.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[name] = s
	}
	return stats
}

// callsSince returns how many more calls of each command ran than in before.
func callsSince(t testing.TB, rdb redis.Cmdable, before map[string]cmdStat) map[string]int {
	t.Helper()
	d := make(map[string]int)
	for name, s := range commandStats(t, rdb) {
		if n := s.calls - before[name].calls; n != 0 && name != "info" {
			d[name] = n
		}
	}
	return d
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// codeMode is one of the two ways the driver runs its Lua: the function
// library (FCALL, with WithFunctions), or scripts (EVALSHA, the default). lose makes
// the server forget that code, as a restart without persistence does; call
// and reload are the commandstats names of a call and of what the server
// is sent again then.
type codeMode struct {
	name         string
	opts         []Option
	call, reload string
	lose         func(context.Context, redis.Cmdable) error
}

var codeModes = []codeMode{
	{"functions", []Option{WithFunctions()}, "fcall", "function|load", func(ctx context.Context, c redis.Cmdable) error {
		return c.FunctionFlush(ctx).Err()
	}},
	{"scripts", nil, "evalsha", "eval", func(ctx context.Context, c redis.Cmdable) error {
		return c.ScriptFlush(ctx).Err()
	}},
}

// scriptCalls counts the script calls, of either kind, in calls.
func scriptCalls(calls map[string]int) int {
	return calls["fcall"] + calls["evalsha"] + calls["eval"]
}

// clusterAddrs returns the addresses of nodes, a Cluster's seeds.
func clusterAddrs(nodes []*redisserver.Server) []string {
	addrs := make([]string, len(nodes))
	for i, s := range nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// newClusterClient returns a client of the Cluster of nodes, closed when
// the test ends.
func newClusterClient(t *testing.T, nodes []*redisserver.Server) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(nodes)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waiterIDs returns the ids of key's waiters in queue order, as
// InspectQueue reports them.
func waiterIDs(t *testing.T, d *Driver, key string) []string {
	t.Helper()
	info, _, err := d.InspectQueue(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range info.Waiters {
		ids = append(ids, w.ID)
	}
	return ids
}

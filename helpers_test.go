package dlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/memdriver"
	"github.com/redis/go-redis/v9"
)

// newLocker and newLockerOn are leasecheck's NewLocker and NewLockerOn,
// under the names counts_test.go calls them by.
var (
	newLocker   = leasecheck.NewLocker
	newLockerOn = leasecheck.NewLockerOn
)

// newMemLocker returns a Client on drv (closed at the end of the test).
func newMemLocker(t testing.TB, drv driver.Driver) *dlock.Client {
	t.Helper()
	c, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newMemClient returns a Client on its own handle of store (nil: a new
// store), closed at the end of the test.
func newMemClient(t testing.TB, store *memdriver.Driver, opts ...dlock.Option) (*dlock.Client, *memdriver.Driver) {
	t.Helper()
	drv := memdriver.New()
	if store != nil {
		drv = store.Connect()
	}
	c, err := dlock.New(drv, append([]dlock.Option{dlock.WithLogger(leasecheck.QuietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, drv
}

// queueClients returns two Clients of one store per driver the test runs
// on: a real Redis server, and the in-memory driver.
func queueClients(t *testing.T, opts ...dlock.Option) map[string][2]*dlock.Client {
	t.Helper()
	srv := redisserver.Start(t)
	mem := memdriver.New()
	newMem := func() *dlock.Client {
		c, err := dlock.New(mem.Connect(), append([]dlock.Option{dlock.WithLogger(leasecheck.QuietLogger())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return map[string][2]*dlock.Client{
		"redis": {leasecheck.NewLocker(t, srv.Addr(), opts...), leasecheck.NewLocker(t, srv.Addr(), opts...)},
		"mem":   {newMem(), newMem()},
	}
}

// waitWaiters waits until key has n waiters in the store.
func waitWaiters(t *testing.T, q driver.Inspector, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _, err := q.InspectQueue(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: %d waiters after 10s, want %d", key, len(info.Waiters), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitFreed fails the test if any of the named locks is still held in the
// store after d.
func waitFreed(t testing.TB, rdb *redis.Client, d time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, name := range names {
		for leasecheck.IsHeld(t, rdb, name) {
			if time.Now().After(deadline) {
				t.Fatalf("lock %q still held after %v", name, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// commandCalls returns the server's count of calls of every command so
// far (INFO commandstats; commands run by scripts count too).
func commandCalls(t testing.TB, rdb *redis.Client) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls[name], _ = strconv.Atoi(v)
			}
		}
	}
	return calls
}

// serverUsec is the server's total command time so far (µs), INFO excluded.
func serverUsec(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":")
		// Script commands count the commands they run inside them too:
		// only top-level commands are summed (the script calls, and those
		// the client sends itself), which is what a script call's usec
		// already includes.
		name := strings.TrimPrefix(line[:strings.IndexByte(line, ':')], "cmdstat_")
		if !topLevel[name] {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(rest), ",") {
			if k, v, _ := strings.Cut(f, "="); k == "usec" {
				u, _ := strconv.ParseFloat(v, 64)
				total += u
			}
		}
	}
	return total
}

// topLevel are the commands dlock's Client sends itself.
var topLevel = map[string]bool{"fcall": true, "function|load": true, "evalsha": true, "eval": true, "publish": true, "subscribe": true,
	"unsubscribe": true, "ping": true}

// tripCounter counts the requests a go-redis client sends: a pipeline
// counts once, as it is one round trip.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

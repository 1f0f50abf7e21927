package redisdriver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// TestServerInstructionsPerCycle counts the instructions a redis-server
// runs for an uncontended Lock+Unlock cycle (serialCycles: dlock's, beside
// a bare SET NX PX and DEL and a cycle shaped like redislock's), and for
// the two steps of a contended fair lock, a waiter joining a held name and
// a release handing the name to the head (the pattern of
// BenchmarkRedisTimeQueue), in both code modes. Instruction counts do not
// drift with the machine's speed as times do, so small changes to the Lua
// show. It needs a server run under callgrind, and is skipped without one:
//
//	valgrind --tool=callgrind --callgrind-out-file=$DIR/cg.out.%p \
//	    redis-server --port 6400 --save '' --appendonly no &
//	DLOCK_CALLGRIND_ADDR=127.0.0.1:6400 DLOCK_CALLGRIND_DIR=$DIR \
//	    go test -run ServerInstructions -v ./redisdriver/
//
// It zeroes the counters (callgrind_control -z), runs a block of calls,
// dumps (-d), and reads the dump's total; a PING's count is reported too,
// for the cost of any request.
func TestServerInstructionsPerCycle(t *testing.T) {
	addr, dir := os.Getenv("DLOCK_CALLGRIND_ADDR"), os.Getenv("DLOCK_CALLGRIND_DIR")
	if addr == "" || dir == "" {
		t.Skip("set DLOCK_CALLGRIND_ADDR and DLOCK_CALLGRIND_DIR to a redis-server under callgrind")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	count := func(f func()) float64 {
		t.Helper()
		return instructions(t, dir, f)
	}
	const n = 600
	ping := count(func() {
		for range n {
			rdb.Ping(ctx)
		}
	}) / n
	t.Logf("PING: %.0f instructions", ping)
	serialCycles(t, rdb, n, count)
	for _, m := range codeModes {
		d := newDriver(t, rdb, m.opts...)
		join, handoff := joinAndHandoff(t, d, "k-"+m.name, n, false, count)
		_, claimed := joinAndHandoff(t, d, "c-"+m.name, n, true, count)
		claim := claimed - handoff
		t.Logf("%s: join %.0f, hand-off %.0f, the granted waiter's claim %.0f, cycle %.0f instructions",
			m.name, join, handoff, claim, join+handoff+claim)
	}
}

// serialCycles logs the instructions of one uncontended acquire and
// release of one name, n times over: dlock's (the fair lock's Enqueue,
// which Lock sends by default, and the plain Acquire), and two floors
// measured the same way: "raw", SET NX PX then DEL (no ownership check),
// and "redislock-shaped", the commands of redislock's two scripts (a SET NX
// PX in Lua, then GET, compare and DEL in Lua) with a value as long as its
// token.
func serialCycles(t *testing.T, rdb *redis.Client, n int, count func(func()) float64) {
	ctx := context.Background()
	owner := driver.Owner{Host: "bench-host", PID: 4242}
	id := func(i int) string { return fmt.Sprintf("serial-%032x", i) }
	obtain := redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])`)
	release := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	token := "AAAAAAAAAAAAAAAAAAAAAA" // 22 characters, as redislock's
	cycles := []struct {
		name  string
		cycle func(i int) error
	}{
		{"raw", func(int) error {
			if err := rdb.SetNX(ctx, "raw", token, time.Hour).Err(); err != nil {
				return err
			}
			return rdb.Del(ctx, "raw").Err()
		}},
		{"redislock-shaped", func(int) error {
			if err := obtain.Run(ctx, rdb, []string{"rl"}, token, 3600000).Err(); err != nil {
				return err
			}
			return release.Run(ctx, rdb, []string{"rl"}, token).Err()
		}},
	}
	for _, m := range codeModes {
		d := newDriver(t, rdb, m.opts...)
		cycles = append(cycles, struct {
			name  string
			cycle func(i int) error
		}{"dlock fair, " + m.name, func(i int) error {
			res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "fair-" + m.name, ID: id(i), TTL: time.Hour, Owner: owner,
				Mode: driver.ModeExclusive, Inbox: "0123456789abcdef0123456789abcdef"})
			if err != nil || !res.Granted {
				return fmt.Errorf("enqueue: %+v, %v", res, err)
			}
			return releaseOnce(d, "fair-"+m.name, id(i), id(i-1))
		}}, struct {
			name  string
			cycle func(i int) error
		}{"dlock plain, " + m.name, func(i int) error {
			res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "plain-" + m.name, ID: id(i), TTL: time.Hour, Owner: owner})
			if err != nil || !res.Acquired {
				return fmt.Errorf("acquire: %+v, %v", res, err)
			}
			return releaseOnce(d, "plain-"+m.name, id(i), id(i-1))
		}})
	}
	for _, c := range cycles {
		for i := range 20 { // warm up: scripts cached
			if err := c.cycle(-1 - i); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		var err error
		per := count(func() {
			for i := 0; i < n && err == nil; i++ {
				err = c.cycle(i)
			}
		}) / float64(n)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("serial cycle, %s: %.0f instructions", c.name, per)
	}
}

// releaseOnce releases key held by id, naming the release of the lease
// before it settled, as a Client does (driver.ReleaseRequest.Settled), and
// fails unless it was released.
func releaseOnce(d *Driver, key, id, settled string) error {
	res, err := d.Release(context.Background(), []driver.ReleaseRequest{{Key: key, ID: id, Settled: settled}})
	if err != nil || len(res) != 1 || res[0] != driver.Released {
		return fmt.Errorf("release: %v, %v", res, err)
	}
	return nil
}

// joinAndHandoff runs n waiters, in blocks of 15, through a held name of
// d's, and returns the instructions per join and per hand-off.
// With claim, each waiter granted then asks the store for its grant, as
// the engine does on a grant announcement (which it cannot trust: see
// driver.Grant), and that call counts with the hand-off.
func joinAndHandoff(t *testing.T, d *Driver, key string, n int, claim bool, count func(func()) float64) (join, handoff float64) {
	ctx := context.Background()
	owner := driver.Owner{Host: "bench-host", PID: 4242}
	next := 0
	newID := func() string { next++; return fmt.Sprintf("%s-%032x", key, next) }
	enqueue := func(id string) driver.QueueResult {
		t.Helper()
		res, err := d.Enqueue(ctx, driver.QueueRequest{Key: key, ID: id, TTL: time.Hour, Owner: owner,
			Mode: driver.ModeExclusive, Wait: true, Inbox: "0123456789abcdef0123456789abcdef"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	holder := newID()
	if res := enqueue(holder); !res.Granted { // also loads the code
		t.Fatalf("holder: %+v", res)
	}
	const block = 15
	for done := 0; done < n; done += block {
		ids := make([]string, block)
		join += count(func() {
			for i := range ids {
				ids[i] = newID()
				if res := enqueue(ids[i]); !res.Queued {
					t.Fatalf("waiter: %+v", res)
				}
			}
		})
		handoff += count(func() {
			for _, id := range ids {
				if got := release(t, d, key, holder); got != driver.Released {
					t.Fatalf("hand-off: %v", got)
				}
				holder = id
				if !claim {
					continue
				}
				if res := enqueue(id); !res.Granted {
					t.Fatalf("claim: %+v", res)
				}
			}
		})
	}
	total := float64(n / block * block)
	return join / total, handoff / total
}

// instructions returns the instructions the server under callgrind ran
// during f, from the dump callgrind_control writes to dir.
func instructions(t *testing.T, dir string, f func()) float64 {
	t.Helper()
	if out, err := exec.Command("callgrind_control", "-z").CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control -z: %v: %s", err, out)
	}
	f()
	if out, err := exec.Command("callgrind_control", "-d").CombinedOutput(); err != nil {
		t.Fatalf("callgrind_control -d: %v: %s", err, out)
	}
	// Dumps are <out-file>.<pid>.<n>; each is removed once read, so the
	// next call finds only its own.
	dumps, _ := filepath.Glob(filepath.Join(dir, "*.[0-9]*.[0-9]*"))
	var total float64
	found := false
	for _, p := range dumps {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if s, ok := strings.CutPrefix(line, "summary: "); ok {
				if v, err := strconv.ParseFloat(strings.Fields(s)[0], 64); err == nil {
					total, found = v, true
				}
			}
		}
		_ = os.Remove(p)
	}
	if !found {
		t.Fatalf("no callgrind dump in %s", dir)
	}
	return total
}

package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
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

// Every call a Lock, TryLock, Unlock or renewal makes completes across a
// slot migration: each script call names every key it touches (and one
// never written, so that none runs while the slot's keys are split), so
// the node refuses it before it runs (TRYAGAIN) until the migration ends,
// and the driver tries again. Before, each of these scripts met a key the
// call had not named that was not on the node it ran on: the fair Lock's
// join, the fair TryLock and the release failed with "Script attempted to
// access a non local key", and the reader's renewal ran on the importing
// node, which had none of the name's keys yet, and answered that the
// lease was lost.
func TestScriptsDuringSlotMigration(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"scripts", nil}, {"functions", []Option{WithFunctions()}}} {
		t.Run(mode.name, func(t *testing.T) { testScriptsDuringSlotMigration(t, mode.opts) })
	}
}

func testScriptsDuringSlotMigration(t *testing.T, opts []Option) {
	nodes := redisserver.StartCluster(t, 2)
	d := newDriver(t, newClusterClient(t, nodes), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two names of one slot on the first node: the fair lock, and a name
	// with a reader.
	tag := ""
	for i := 0; tag == ""; i++ {
		if c := fmt.Sprintf("{m%d}", i); slot(d.lockKey(c)) < 16384/2 {
			tag = c
		}
	}
	fair, shared := tag+":fair", tag+":shared"
	excl := func(id string, wait bool) driver.QueueRequest {
		return driver.QueueRequest{Key: fair, ID: id, TTL: time.Minute, Mode: driver.ModeExclusive, Wait: wait, Inbox: "box-" + id}
	}
	// The fair lock has a last release, was handed from a to b (so its
	// queue keys are there, with no waiter list), and b holds it.
	mustAcquire(t, d, fair, "x")
	mustRelease(t, d, fair, "x")
	mustEnqueue(ctx, t, d, excl("a", true), true)
	mustEnqueue(ctx, t, d, excl("b", true), false)
	mustRelease(t, d, fair, "a")
	if res, err := d.Enqueue(ctx, excl("b", true)); err != nil || !res.Granted {
		t.Fatalf("b after the hand-off: %+v, %v", res, err)
	}
	mustEnqueue(ctx, t, d, driver.QueueRequest{Key: shared, ID: "r", TTL: time.Minute, Mode: driver.ModeShared}, true)

	m := startMigration(ctx, t, nodes, int(slot(d.lockKey(fair))))
	results := map[string]chan string{}
	do := func(what string, f func() string) {
		ch := make(chan string, 1)
		results[what] = ch
		go func() { ch <- f() }()
	}
	do("fair Lock", func() string {
		res, err := d.Enqueue(ctx, excl("c", true))
		return fmt.Sprintf("granted %v queued %v err %v", res.Granted, res.Queued, err)
	})
	do("TryLock", func() string {
		res, err := d.Acquire(ctx, driver.AcquireRequest{Key: fair, ID: "t", TTL: time.Minute})
		return fmt.Sprintf("acquired %v err %v", res.Acquired, err)
	})
	do("RWMutex TryLock", func() string { // the exclusive TryLock through the queue
		req := excl("w", false)
		req.Key = shared
		res, err := d.Enqueue(ctx, req)
		return fmt.Sprintf("granted %v queued %v err %v", res.Granted, res.Queued, err)
	})
	do("Unlock", func() string {
		res, err := d.Release(ctx, []driver.ReleaseRequest{{Key: fair, ID: "b"}})
		return fmt.Sprintf("%v %v", res, err)
	})
	do("renewal", func() string {
		held, err := d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindRead, Key: shared, ID: "r", TTL: time.Minute}})
		return fmt.Sprintf("%v %v", held, err)
	})
	// Every call is refused while the keys are split, until it is sent
	// again after the migration: none answers before it ends.
	early := map[string]string{}
	m.waitRefusals(t, 6*len(results), func() bool {
		for what, ch := range results {
			select {
			case r := <-ch:
				early[what] = r
			default:
			}
		}
		return len(early) == len(results)
	})
	if len(early) > 0 {
		t.Fatalf("answered during the migration: %q", early)
	}
	m.finish(t)
	got := map[string]string{}
	for what, ch := range results {
		got[what] = <-ch
	}
	// The release and the fair Lock come in either order: c is granted, at
	// once or by the hand-off; the TryLock takes the lock only if it came
	// between them, and is refused otherwise. The reader still holds its
	// name.
	want := map[string][]string{
		"fair Lock":       {"granted true queued false err <nil>", "granted false queued true err <nil>"},
		"TryLock":         {"acquired false err <nil>", "acquired true err <nil>"},
		"RWMutex TryLock": {"granted false queued false err <nil>"},
		"Unlock":          {"[1] <nil>"},
		"renewal":         {"[true] <nil>"},
	}
	for what, r := range got {
		if !slices.Contains(want[what], r) {
			t.Errorf("%s after the migration: %s, want one of %q", what, r, want[what])
		}
	}
}

// mustEnqueue sends req and fails the test unless it is granted (granted)
// or queued (!granted).
func mustEnqueue(ctx context.Context, t *testing.T, d *Driver, req driver.QueueRequest, granted bool) {
	t.Helper()
	res, err := d.Enqueue(ctx, req)
	if err != nil || res.Granted != granted || res.Queued == granted {
		t.Fatalf("enqueue %s on %q: %+v, %v; want granted %v", req.ID, req.Key, res, err, granted)
	}
}

// migration is a slot being moved from the first node of a Cluster to the
// second.
type migration struct {
	ctx      context.Context
	slot     int
	src, dst *redis.Client
	dstNode  *redisserver.Server
	dstID    string
	before   int // TRYAGAIN refusals of both nodes when it started
}

// startMigration marks slot as migrating from nodes[0] to nodes[1], and
// moves none of its keys yet.
func startMigration(ctx context.Context, t *testing.T, nodes []*redisserver.Server, slot int) *migration {
	t.Helper()
	m := &migration{ctx: ctx, slot: slot, src: nodes[0].Client(t), dst: nodes[1].Client(t), dstNode: nodes[1]}
	srcID := nodeID(ctx, t, m.src)
	m.dstID = nodeID(ctx, t, m.dst)
	for _, c := range []struct {
		rdb   *redis.Client
		state string
		id    string
	}{{m.dst, "IMPORTING", srcID}, {m.src, "MIGRATING", m.dstID}} {
		if err := c.rdb.Do(ctx, "CLUSTER", "SETSLOT", slot, c.state, c.id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	m.before = m.refusals(t)
	return m
}

// refusals returns the TRYAGAIN answers both nodes have sent.
func (m *migration) refusals(t *testing.T) int {
	return errorCount(m.ctx, t, m.src, "TRYAGAIN") + errorCount(m.ctx, t, m.dst, "TRYAGAIN")
}

// waitRefusals waits, for up to 10 s, until the nodes have refused n calls
// since the migration started, or stop, called at every poll, says that
// nothing is left to refuse.
func (m *migration) waitRefusals(t *testing.T, n int, stop func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.refusals(t)-m.before < n {
		if stop() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d TRYAGAIN refusals during the migration", n)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
	stop()
}

// finish moves the slot's keys to the second node and gives it the slot.
func (m *migration) finish(t *testing.T) {
	t.Helper()
	keys, err := m.src.ClusterGetKeysInSlot(m.ctx, m.slot, 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(m.dstNode.Addr())
	for _, k := range keys {
		if err := m.src.Migrate(m.ctx, host, port, k, 0, 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*redis.Client{m.dst, m.src} {
		if err := c.Do(m.ctx, "CLUSTER", "SETSLOT", m.slot, "NODE", m.dstID).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// An Unlock during a slot migration that lasts longer than the driver's
// retries (5 s) and the Client's first background release: the Client
// goes on releasing in the background, so the lock is released once the
// migration ends, not left held by nobody until its TTL. Before, the
// background release was tried once, and the lock stayed held.
func TestUnlockOutlastedByASlotMigration(t *testing.T) {
	nodes := redisserver.StartCluster(t, 2)
	d := newDriver(t, newClusterClient(t, nodes))
	c, err := dlock.New(d, dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("long-migration:%d", i); slot(d.lockKey(n)) < 16384/2 {
			name = n
		}
	}
	const ttl = 30 * time.Second
	l, err := c.Lock(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	m := startMigration(ctx, t, nodes, int(slot(d.lockKey(name))))
	uctx, ucancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Unlock(uctx)
	ucancel()
	if err == nil {
		t.Fatal("Unlock during the migration returned nil: the release cannot have run")
	}
	// The migration lasts longer than the driver's retries of one call
	// (migrationWait) and the Client's first background release: the
	// scenario, not a wait for a signal.
	time.Sleep(migrationWait + 2*time.Second)
	m.finish(t)
	finished := time.Now()
	for isHeldOn(ctx, t, m.dst, d.lockKey(name)) {
		if time.Since(finished) > ttl/2 {
			t.Fatalf("lock still held %v after the migration ended", time.Since(finished).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a synchronisation
	}
	t.Logf("lock released %v after the migration ended", time.Since(finished).Round(time.Millisecond))
}

// isHeldOn reports whether the node of rdb has key.
func isHeldOn(ctx context.Context, t *testing.T, rdb *redis.Client, key string) bool {
	t.Helper()
	n, err := rdb.Exists(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

package redisdriver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// Calls sent in one pipeline to a server that lost the library find it
// missing, load it once, and go again as FCALL: no script, no error.
func TestPipelineLoadsTheLibrary(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb, WithFunctions())
	ctx := context.Background()
	mustAcquire(t, d, "a", "x")
	mustAcquire(t, d, "b", "y")
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := []driver.ReleaseRequest{{Key: "a", ID: "x"}, {Key: "b", ID: "y"}}
	calls := []*call{d.lockReleaseCall(reqs, []int{0}), d.lockReleaseCall(reqs, []int{1})}
	before := commandStats(t, rdb)
	if err := d.runCalls(ctx, calls); err != nil {
		t.Fatal(err)
	}
	for i, cl := range calls {
		if v, err := cl.reply.Text(); err != nil || v != strconv.Itoa(replyReleased) {
			t.Fatalf("call %d: %q, %v; want released", i, v, err)
		}
	}
	got := callsSince(t, rdb, before)
	if got["fcall"] != 4 || got["function|load"] != 1 || got["evalsha"]+got["eval"] != 0 {
		t.Fatalf("calls %v; want 2 FCALL answered 'not found', one FUNCTION LOAD, 2 FCALL again", got)
	}
	if d.noFunctions.Load() {
		t.Fatal("the driver gave up functions")
	}
}

// A server that refuses functions (one before Redis 7, an ACL) gets the
// same locks through scripts: one refused load or call, then scripts for good,
// alone and in pipelines.
func TestFallsBackToScripts(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string // of the server
		acl  string   // rules of the user the driver logs in as, if any
		// FCALLs sent: none where the first call's FUNCTION LOAD is
		// refused, one where only FCALL is.
		fcalls int64
	}{
		{name: "no FCALL (before Redis 7)", args: []string{"--rename-command", "FCALL", "", "--rename-command", "FUNCTION", ""}},
		{name: "ACL without FCALL", acl: "-fcall", fcalls: 1},
		{name: "ACL without FUNCTION", acl: "-function"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redisserver.Start(t, redisserver.WithArgs(c.args...))
			admin := srv.Client(t)
			ctx := context.Background()
			rdb := admin
			if c.acl != "" {
				if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">secret", "~*", "&*", "+@all", c.acl).Err(); err != nil {
					t.Fatal(err)
				}
				rdb = redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "secret"})
				t.Cleanup(func() { _ = rdb.Close() })
			}
			fcalls := &countFCalls{}
			rdb.AddHook(fcalls)
			d := newDriver(t, rdb, WithFunctions())
			tok := mustAcquire(t, d, "k", "a")
			if !d.noFunctions.Load() {
				t.Fatal("the driver still runs functions")
			}
			if n := fcalls.n.Load(); n != c.fcalls {
				t.Fatalf("%d FCALL sent, want %d", n, c.fcalls)
			}
			stats := commandStats(t, admin)
			mustRelease(t, d, "k", "a")
			if next := mustAcquire(t, d, "k", "b"); next <= tok {
				t.Fatalf("token %d after %d", next, tok)
			}
			mustAcquire(t, d, "other", "c")
			res, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "k", ID: "b"}, {Key: "other", ID: "c"}})
			if err != nil || res[0] != driver.Released || res[1] != driver.Released {
				t.Fatalf("batched release: %v, %v", res, err)
			}
			if n := fcalls.n.Load(); n != c.fcalls {
				t.Fatalf("%d FCALL sent in all, want only the first's %d", n, c.fcalls)
			}
			if got := callsSince(t, admin, stats); got["evalsha"] != 4 || got["fcall"] != 0 {
				t.Fatalf("calls %v; want 4 EVALSHA", got)
			}
		})
	}

	// A pipeline is the first call: its calls go again as scripts.
	srv := redisserver.Start(t, redisserver.WithArgs("--rename-command", "FCALL", ""))
	rdb := srv.Client(t)
	d := newDriver(t, rdb) // scripts, the default
	mustAcquire(t, d, "a", "x")
	mustAcquire(t, d, "b", "y")
	d = newDriver(t, rdb, WithFunctions())
	reqs := []driver.ReleaseRequest{{Key: "a", ID: "x"}, {Key: "b", ID: "y"}}
	calls := []*call{d.lockReleaseCall(reqs, []int{0}), d.lockReleaseCall(reqs, []int{1})}
	if err := d.runCalls(context.Background(), calls); err != nil || !d.noFunctions.Load() {
		t.Fatalf("first call a pipeline: %v; functions given up: %v", err, d.noFunctions.Load())
	}
	for i, cl := range calls {
		if v, err := cl.reply.Text(); err != nil || v != strconv.Itoa(replyReleased) {
			t.Fatalf("first call a pipeline, call %d: %q, %v; want released", i, v, err)
		}
	}
}

// Two versions of the driver on one server each run their own library:
// the name carries a hash of the code.
func TestLibraryNameFollowsTheCode(t *testing.T) {
	name := func(code string) string { return strings.TrimPrefix(strings.SplitN(code, "\n", 2)[0], "#!lua name=") }
	changed := newLibrary([]*script{newScript("probe", "", "return 1")}, nil)
	if a, b := name(libraryCode), name(changed); a == b || !strings.HasPrefix(a, "dlock_") {
		t.Fatalf("library names %q and %q", a, b)
	}
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	if err := rdb.FunctionLoad(ctx, changed).Err(); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, rdb, WithFunctions())
	mustAcquire(t, d, "k", "a")
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	if err != nil || len(libs) != 2 {
		t.Fatalf("libraries %v, %v; want both", libs, err)
	}
}

// countFCalls counts the FCALL commands a client sends, alone or in
// pipelines.
type countFCalls struct{ n atomic.Int64 }

func (h *countFCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countFCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *countFCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *countFCalls) count(cmd redis.Cmder) {
	if cmd.Name() == "fcall" {
		h.n.Add(1)
	}
}

// In Cluster every master gets the library where a call first needs it,
// and a master that lost it (a restart, FUNCTION FLUSH) gets it again,
// alone and in a batch, while the others keep theirs.
func TestClusterMastersLoadTheLibrary(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	c := newClusterClient(t, nodes)
	d := newDriver(t, c, WithFunctions())
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d", "e", "f"}
	for _, k := range keys {
		mustAcquire(t, d, k, "id-"+k)
	}
	libraries := func(s *redisserver.Server) int {
		libs, err := s.Client(t).FunctionList(ctx, redis.FunctionListQuery{}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(libs)
	}
	for i, s := range nodes {
		if n := libraries(s); n != 1 {
			t.Fatalf("node %d has %d libraries after acquisitions on every node, want 1", i, n)
		}
	}
	if err := nodes[0].Client(t).FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var renews []driver.RenewRequest
	for _, k := range keys {
		renews = append(renews, driver.RenewRequest{Key: k, ID: "id-" + k, TTL: time.Minute})
	}
	if held, err := d.Renew(ctx, renews); err != nil || strings.Contains(fmt.Sprint(held), "false") {
		t.Fatalf("renew after a master lost the library: %v, %v", held, err)
	}
	if n := libraries(nodes[0]); n != 1 || d.noFunctions.Load() {
		t.Fatalf("the master that lost it has %d libraries, functions given up: %v", n, d.noFunctions.Load())
	}
	if err := nodes[0].Client(t).FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		mustRelease(t, d, k, "id-"+k)
	}
	if n := libraries(nodes[0]); n != 1 || d.noFunctions.Load() {
		t.Fatalf("after lone releases: %d libraries, functions given up: %v", n, d.noFunctions.Load())
	}
}

// On a Ring the library is loaded on every shard, so calls on keys of
// either shard run as functions.
func TestRingShardsLoadTheLibrary(t *testing.T) {
	a, b := redisserver.Start(t), redisserver.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	d := newDriver(t, ring, WithFunctions())
	ctx := context.Background()
	for i := range 20 {
		k := fmt.Sprint("k", i)
		mustAcquire(t, d, k, "a")
		mustRelease(t, d, k, "a")
	}
	for name, s := range map[string]*redisserver.Server{"a": a, "b": b} {
		libs, err := s.Client(t).FunctionList(ctx, redis.FunctionListQuery{}).Result()
		if err != nil || len(libs) != 1 {
			t.Fatalf("shard %s: libraries %v, %v; want the driver's", name, libs, err)
		}
		st := commandStats(t, s.Client(t))
		if st["fcall"].calls == 0 || st["evalsha"].calls+st["eval"].calls != 0 {
			t.Fatalf("shard %s: %d FCALL, %d scripts; want functions only", name, st["fcall"].calls, st["evalsha"].calls+st["eval"].calls)
		}
	}
	if d.noFunctions.Load() {
		t.Fatal("the driver gave up functions")
	}
}

package redisdriver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// outOfMemory fills the server behind rdb past a maxmemory it then sets,
// so that commands that need memory are refused; the cleanup undoes it.
func outOfMemory(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.SetRange(ctx, "ballast", 8<<20, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "2mb").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a write with memory full: %v, want OOM", err)
	}
	t.Cleanup(func() {
		_ = rdb.Del(ctx, "ballast").Err()
		_ = rdb.ConfigSet(ctx, "maxmemory", "0").Err()
	})
}

// With memory full, every call answers as the scripts did: an acquisition
// that writes nothing (a held name, a retry of one's own) is answered, one
// of a free name is refused with the server's OOM error, and renewals,
// releases and InspectQueue work, in both code modes. (A function without
// the allow-oom flag is refused whole; the driver sends it again as a
// script, which runs until it needs memory.)
func TestOutOfMemoryAnswersAsScriptsDo(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			srv := redisserver.Start(t, redisserver.WithArgs("--maxmemory-policy", "noeviction"))
			rdb := srv.Client(t)
			d := newDriver(t, rdb, m.opts...)
			ctx := context.Background()
			mustAcquire(t, d, "busy", "a")
			tok := mustAcquire(t, d, "own", "b")
			mustAcquire(t, d, "ren", "c")
			mustAcquire(t, d, "rel", "e")
			if res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "q", ID: "h", TTL: time.Minute, Mode: driver.ModeExclusive}); err != nil || !res.Granted {
				t.Fatalf("enqueue: %+v, %v", res, err)
			}
			outOfMemory(t, rdb)

			if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "busy", ID: "z", TTL: time.Minute, Waiting: true}); err != nil || res.Acquired || res.RetryAfter <= 0 {
				t.Errorf("acquire of a held name: %+v, %v; want busy with a retry time", res, err)
			}
			if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "own", ID: "b", TTL: time.Minute}); err != nil || !res.Acquired || res.Token != tok {
				t.Errorf("acquire retried: %+v, %v; want acquired, token %d", res, err, tok)
			}
			if _, err := d.Acquire(ctx, driver.AcquireRequest{Key: "free", ID: "z", TTL: time.Minute}); err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Errorf("acquire of a free name: %v, want the server's OOM error", err)
			}
			if res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "busy", ID: "z", TTL: time.Minute, Mode: driver.ModeExclusive}); err != nil || res.Granted || res.Queued || res.RetryAfter <= 0 {
				t.Errorf("enqueue on a held name, no wait: %+v, %v; want refused with a retry time", res, err)
			}
			if _, ok, err := d.InspectQueue(ctx, "q"); err != nil || !ok {
				t.Errorf("InspectQueue: %v, %v", ok, err)
			}
			if res, err := d.Renew(ctx, []driver.RenewRequest{{Key: "ren", ID: "c", TTL: time.Minute}}); err != nil || !res[0] {
				t.Errorf("renew: %v, %v", res, err)
			}
			if got := release(t, d, "rel", "e"); got != driver.Released {
				t.Errorf("release: %v", got)
			}
			if m.name == "functions" && d.noFunctions.Load() {
				t.Error("the driver gave up functions")
			}
		})
	}
}

// FUNCTION LOAD refused for a reason that passes (memory full here;
// READONLY or LOADING alike) sends that call as a script, and the driver
// keeps using functions once the server takes the library again.
func TestLoadRefusedForNowKeepsFunctions(t *testing.T) {
	srv := redisserver.Start(t, redisserver.WithArgs("--maxmemory-policy", "noeviction"))
	rdb := srv.Client(t)
	d := newDriver(t, rdb, WithFunctions())
	ctx := context.Background()
	mustAcquire(t, d, "k", "a")
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Run("memory full", func(t *testing.T) { // its cleanup frees the memory
		outOfMemory(t, rdb)
		if res, err := d.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "a", TTL: time.Minute}}); err != nil || !res[0] {
			t.Fatalf("renew: %v, %v", res, err)
		}
	})
	mustRelease(t, d, "k", "a")
	if d.noFunctions.Load() {
		t.Fatal("a FUNCTION LOAD refused for lack of memory made the driver give up functions")
	}
	before := commandStats(t, rdb)
	mustAcquire(t, d, "k", "b")
	if got := callsSince(t, rdb, before); got["fcall"] != 1 {
		t.Fatalf("calls %v; want one FCALL", got)
	}
}

// Errors that are not the server refusing functions leave the driver on
// functions, and a call that failed is not run again as a script: a
// script's own error (whose text may quote a key named like a refusal)
// and a permission on a key.
func TestOtherErrorsKeepFunctions(t *testing.T) {
	for _, name := range []string{"Function not found", "unknown command", "NOPERM 'fcall'"} {
		t.Run("script error on "+name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := srv.Client(t)
			d := newDriver(t, rdb, WithFunctions())
			ctx := context.Background()
			mustAcquire(t, d, "warm", "w")
			if err := rdb.Set(ctx, d.lastKey(name), "x:bad:0:{}", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			before := commandStats(t, rdb)
			if _, err := d.Acquire(ctx, driver.AcquireRequest{Key: name, ID: "a", TTL: time.Minute}); err == nil {
				t.Fatal("no error for a malformed value")
			}
			if got := callsSince(t, rdb, before); got["fcall"] != 1 || got["evalsha"]+got["eval"] != 0 || d.noFunctions.Load() {
				t.Fatalf("calls %v, functions given up: %v; want one FCALL and functions kept", got, d.noFunctions.Load())
			}
		})
	}
	t.Run("key permission", func(t *testing.T) {
		srv := redisserver.Start(t)
		admin := srv.Client(t)
		ctx := context.Background()
		if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~dlock:{ok*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "app", Password: "pw"})
		t.Cleanup(func() { _ = rdb.Close() })
		d := newDriver(t, rdb, WithFunctions())
		mustAcquire(t, d, "ok1", "a")
		if _, err := d.Acquire(ctx, driver.AcquireRequest{Key: "other", ID: "a", TTL: time.Minute}); err == nil {
			t.Fatal("acquired a key the ACL forbids")
		}
		mustAcquire(t, d, "ok2", "a")
		if d.noFunctions.Load() {
			t.Fatal("a key permission made the driver give up functions")
		}
	})
}

// A slot moved to a master without the library (a node added to the
// cluster gets slots, not functions) while the client still has the old
// layout: the call loads the library on the masters it finds after
// reloading the layout, and the driver keeps functions.
func TestClusterSlotMovedToMasterWithoutLibrary(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := make([]string, len(nodes))
	for i, s := range nodes {
		id, err := s.Client(t).Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	nodeOf := func(c *redis.Client, key string) int {
		owner, err := c.Do(ctx, "CLUSTER", "SLOTS").Slice()
		if err != nil {
			t.Fatal(err)
		}
		s := int64(slot(key))
		for _, r := range owner {
			rng := r.([]any)
			if rng[0].(int64) <= s && s <= rng[1].(int64) {
				port := rng[2].([]any)[1].(int64)
				for i, n := range nodes {
					if n.Port() == int(port) {
						return i
					}
				}
			}
		}
		t.Fatalf("no node serves slot %d", s)
		return -1
	}
	for round := range 3 {
		d := newDriver(t, newClusterClient(t, nodes), WithFunctions())
		key := fmt.Sprintf("moving-%d", round)
		for i := range 30 { // the client learns the layout; every master gets the library
			mustAcquire(t, d, fmt.Sprintf("warm-%d-%d", round, i), "w")
		}
		s := slot(d.lockKey(key))
		from := nodeOf(nodes[0].Client(t), d.lockKey(key))
		to := (from + 1) % len(nodes)
		if err := nodes[to].Client(t).FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if err := n.Client(t).Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", ids[to]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		mustAcquire(t, d, key, "a")
		if d.noFunctions.Load() {
			t.Fatalf("round %d: the driver gave up functions", round)
		}
		if libs, err := nodes[to].Client(t).FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) != 1 {
			t.Fatalf("round %d: the slot's new master has libraries %v, %v; want the driver's", round, libs, err)
		}
		mustRelease(t, d, key, "a")
	}
}

// The library's name is a hash of all of its code, the functions' flags
// included: two versions that differ only there never share a library.
func TestLibraryNameCoversFlags(t *testing.T) {
	name := func(code string) string { return strings.TrimPrefix(strings.SplitN(code, "\n", 2)[0], "#!lua name=") }
	s1, s2 := newScript("probe", "", "return 1"), newScript("probe", "", "return 1")
	a := newLibrary([]*script{s1}, nil)
	b := newLibrary([]*script{s2}, map[*script]bool{s2: true})
	if a == b || name(a) == name(b) {
		t.Fatalf("libraries that differ in flags are both named %q", name(a))
	}
	if s1.fn == s2.fn || !strings.HasPrefix(s1.fn, name(a)+"_") {
		t.Fatalf("function names %q and %q", s1.fn, s2.fn)
	}
}

// With writes stopped for a failed background save (MISCONF), a call that
// writes nothing answers as the scripts did: functions, none of them
// no-writes, are refused whole then, and go again as scripts.
func TestWritesStoppedAnswersAsScriptsDo(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			// A save into a directory nobody can write to fails.
			srv := redisserver.Start(t, redisserver.WithArgs("--save", "3600 1", "--dir", "/proc"))
			rdb := srv.Client(t)
			d := newDriver(t, rdb, m.opts...)
			ctx := context.Background()
			mustAcquire(t, d, "busy", "a")
			if err := rdb.BgSave(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 5*time.Second, "a failed background save", func() bool {
				return strings.Contains(rdb.Info(ctx, "persistence").Val(), "rdb_last_bgsave_status:err")
			})
			if err := rdb.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "MISCONF") {
				t.Fatalf("a write: %v, want MISCONF", err)
			}
			if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "busy", ID: "z", TTL: time.Minute}); err != nil || res.Acquired {
				t.Errorf("acquire of a held name: %+v, %v; want busy", res, err)
			}
			if got := release(t, d, "busy", "nobody"); got != driver.NotHeld {
				t.Errorf("release by a non-holder: %v, want NotHeld", got)
			}
			if _, _, err := d.InspectQueue(ctx, "busy"); err != nil {
				t.Errorf("InspectQueue: %v", err)
			}
		})
	}
}

// Calls that find the library missing together load it once.
func TestConcurrentMissesLoadOnce(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb, WithFunctions())
	ctx := context.Background()
	mustAcquire(t, d, "warm", "w")
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := commandStats(t, rdb)
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			res, err := d.Acquire(ctx, driver.AcquireRequest{Key: fmt.Sprint("k", i), ID: "a", TTL: time.Minute})
			if err == nil && !res.Acquired {
				err = fmt.Errorf("k%d not acquired", i)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := callsSince(t, rdb, before)
	if got["function|load"] != 1 || got["evalsha"]+got["eval"] != 0 || d.noFunctions.Load() {
		t.Fatalf("calls %v; want one FUNCTION LOAD and no script", got)
	}
}

package redisdriver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// calls returns how many times Redis ran each of the named commands.
func calls(t *testing.T, rdb *redis.Client, names ...string) map[string]int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int)
	for _, line := range strings.Split(info, "\n") {
		for _, n := range names {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+n+":calls=")
			if ok {
				got[n], _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			}
		}
	}
	return got
}

// newDriver returns a Driver on rdb that has already acquired the given
// names, so their next acquisition takes the pipeline path.
func newDriver(t *testing.T, rdb redis.UniversalClient, known ...string) *Driver {
	t.Helper()
	d, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range known {
		d.known.add(name)
	}
	return d
}

func mustAcquire(t *testing.T, d *Driver, key, id string) uint64 {
	t.Helper()
	res, err := d.Acquire(context.Background(), driver.AcquireRequest{Key: key, ID: id, TTL: 10 * time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("acquire %q as %s: %+v, %v", key, id, res, err)
	}
	return res.Token
}

func mustRelease(t *testing.T, d *Driver, key, id string) {
	t.Helper()
	res, err := d.Release(context.Background(), driver.ReleaseRequest{Key: key, ID: id})
	if err != nil || res != driver.Released {
		t.Fatalf("release %q as %s: %v, %v", key, id, res, err)
	}
}

// The first acquisition of a name runs the script; later ones are a
// pipeline of plain commands and run no script at all.
func TestKnownNamesAcquireWithoutScript(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	first := mustAcquire(t, d, "k", "a")
	mustRelease(t, d, "k", "a")
	before := calls(t, rdb, "evalsha", "eval", "incr")
	second := mustAcquire(t, d, "k", "b")
	after := calls(t, rdb, "evalsha", "eval", "incr")
	if after["evalsha"] != before["evalsha"] || after["eval"] != before["eval"] {
		t.Errorf("second acquisition ran a script: %v -> %v", before, after)
	}
	if after["incr"] != before["incr"]+1 {
		t.Errorf("second acquisition: want one INCR, stats %v -> %v", before, after)
	}
	if second != first+1 {
		t.Errorf("tokens %d then %d, want consecutive", first, second)
	}
	if first < unseeded {
		t.Errorf("first token %d was not seeded from the server clock", first)
	}
}

// A busy lock is not taken by either path, reports the holder's remaining
// TTL when the caller waits, and the holder's lock is untouched; the failed
// pipelines still move the counter, and the next holder's token is above all of them.
func TestBusyLockOnBothPaths(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	holder := newDriver(t, rdb)
	tok := mustAcquire(t, holder, "k", "holder")
	for _, known := range []bool{false, true} {
		d := newDriver(t, rdb)
		if known {
			d.known.add("k")
		}
		res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "rival", TTL: time.Second, Waiting: true})
		if err != nil || res.Acquired || res.RetryAfter <= 9*time.Second || res.RetryAfter > 10*time.Second {
			t.Fatalf("known=%v: busy lock answered %+v, %v; want not acquired, retry after about 10s", known, res, err)
		}
	}
	// A caller that will not wait is spared the PTTL on the pipeline path.
	d := newDriver(t, rdb, "k")
	before := calls(t, rdb, "pttl")
	res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "rival", TTL: time.Second})
	if err != nil || res.Acquired || res.RetryAfter != 0 || calls(t, rdb, "pttl")["pttl"] != before["pttl"] {
		t.Fatalf("busy lock, not waiting: %+v, %v, pttl calls %v -> %v", res, err, before, calls(t, rdb, "pttl"))
	}
	if v := rdb.Get(ctx, "dlock:{k}").Val(); !strings.HasPrefix(v, "holder:") {
		t.Fatalf("holder's lock value became %q", v)
	}
	mustRelease(t, holder, "k", "holder")
	if next := mustAcquire(t, holder, "k", "next"); next <= tok+2 {
		t.Fatalf("next holder's token %d, want above %d (the holder's %d plus two failed attempts)", next, tok+2, tok)
	}
}

// A lost fencing counter is seeded again from the server clock on both
// paths, so tokens keep increasing across the loss.
func TestLostCounterIsReseededOnBothPaths(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	known := newDriver(t, rdb)
	last := mustAcquire(t, known, "k", "a")
	mustRelease(t, known, "k", "a")
	for i, d := range []*Driver{known, nil} {
		if d == nil {
			d = newDriver(t, rdb) // a driver that has not seen the name: script path
		}
		if err := rdb.Del(ctx, "dlock:{k}:fence").Err(); err != nil {
			t.Fatal(err)
		}
		tok := mustAcquire(t, d, "k", "b")
		if tok <= last {
			t.Fatalf("path %d: token %d after the counter was lost, want above %d", i, tok, last)
		}
		if got, _ := rdb.Get(ctx, "dlock:{k}:fence").Uint64(); got != tok {
			t.Fatalf("path %d: counter %d, token %d", i, got, tok)
		}
		mustRelease(t, d, "k", "b")
		last = tok
	}
}

// seed.lua seeds only for the holder.
func TestSeedScriptChecksOwnership(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	d := newDriver(t, rdb)
	mustAcquire(t, d, "k", "a")
	if err := rdb.Set(ctx, "dlock:{k}:fence", 3, 0).Err(); err != nil {
		t.Fatal(err)
	}
	err := seedScript.Run(ctx, rdb, []string{"dlock:{k}", "dlock:{k}:fence"}, idPrefix("b")).Err()
	if err != redis.Nil {
		t.Fatalf("seed by a non-holder: %v, want nil reply", err)
	}
	if v := rdb.Get(ctx, "dlock:{k}:fence").Val(); v != "3" {
		t.Fatalf("a non-holder's seed changed the counter to %s", v)
	}
	tok, err := seedScript.Run(ctx, rdb, []string{"dlock:{k}", "dlock:{k}:fence"}, idPrefix("a")).Int64()
	if err != nil || tok < unseeded {
		t.Fatalf("seed by the holder: %d, %v", tok, err)
	}
}

func TestNameSetIsBounded(t *testing.T) {
	s := newNameSet()
	for i := range 3 * maxKnownNames {
		s.add(strconv.Itoa(i))
	}
	if len(s.m) != maxKnownNames {
		t.Fatalf("%d names kept, want %d", len(s.m), maxKnownNames)
	}
	if !s.has(strconv.Itoa(3*maxKnownNames - 1)) {
		t.Fatal("the newest name was forgotten")
	}
}

// A request sent twice — go-redis resends a command whose reply was lost —
// is acquired both times, on both paths, and the second token is the one to
// use: it is above the first.
func TestRepeatedRequestStillAcquires(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	for _, known := range []bool{false, true} {
		d := newDriver(t, rdb)
		if known {
			d.known.add("k")
		}
		req := driver.AcquireRequest{Key: "k", ID: "a", TTL: 10 * time.Second}
		first, err1 := d.acquire(ctx, req, "a:1:{}")
		if !known {
			d.known = newNameSet() // the repeat goes through the script too
		}
		again, err2 := d.acquire(ctx, req, "a:1:{}")
		if err1 != nil || err2 != nil || !first.Acquired || !again.Acquired || again.Token <= first.Token {
			t.Fatalf("known=%v: %+v %v, then %+v %v; want acquired twice, increasing tokens", known, first, err1, again, err2)
		}
		other, err := d.acquire(ctx, driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second}, "b:1:{}")
		if err != nil || other.Acquired {
			t.Fatalf("known=%v: another owner got the lock: %+v, %v", known, other, err)
		}
		mustRelease(t, d, "k", "a")
	}
}

// A release sent again after it succeeded answers AlreadyReleased — also
// while another owner holds the lock, which it took after that release —
// until another owner has released the lock since.
func TestRepeatedReleaseIsRecognised(t *testing.T) {
	srv := redistest.Start(t)
	d := newDriver(t, srv.Client(t))
	ctx := context.Background()
	mustAcquire(t, d, "k", "a")
	mustRelease(t, d, "k", "a")
	if res, err := d.Release(ctx, driver.ReleaseRequest{Key: "k", ID: "a"}); err != nil || res != driver.AlreadyReleased {
		t.Fatalf("repeated release: %v, %v; want AlreadyReleased", res, err)
	}
	mustAcquire(t, d, "k", "b")
	if res, err := d.Release(ctx, driver.ReleaseRequest{Key: "k", ID: "a"}); err != nil || res != driver.AlreadyReleased {
		t.Fatalf("repeated release while another owner holds the lock: %v, %v; want AlreadyReleased", res, err)
	}
	mustRelease(t, d, "k", "b")
	if res, err := d.Release(ctx, driver.ReleaseRequest{Key: "k", ID: "a"}); err != nil || res != driver.NotHeld {
		t.Fatalf("release by a former owner after another released: %v, %v; want NotHeld", res, err)
	}
}

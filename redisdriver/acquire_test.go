package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// Tokens keep increasing when the server comes back from an older
// snapshot (as after a crash with periodic RDB saves, AOF everysec, or a
// failover to a lagging replica), and when it comes back empty.
func TestTokensIncreaseAcrossRestartFromOlderSnapshot(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	var last uint64
	cycle := func(phase string, n int) {
		for i := range n {
			tok := mustAcquire(t, d, "k", fmt.Sprintf("%s%d", phase, i))
			if tok <= last {
				t.Fatalf("%s: token %d after %d", phase, tok, last)
			}
			last = tok
			mustRelease(t, d, "k", fmt.Sprintf("%s%d", phase, i))
		}
	}
	cycle("before", 3)
	if err := rdb.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cycle("after", 3) // tokens the snapshot does not know
	srv.Kill()
	srv.Restart() // loads the snapshot: the older state
	if n, err := rdb.Exists(ctx, d.lastKey("k")).Result(); err != nil || n != 1 {
		t.Fatalf("the snapshot's record of k was not restored: %d, %v", n, err)
	}
	cycle("restored", 1)

	srv.RestartEmpty()
	cycle("empty", 1)
}

// A recorded token ahead of the server clock (a master whose clock ran
// ahead, then failed over) is still exceeded: token = record + 1.
func TestTokenExceedsRecordAheadOfClock(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	ahead := uint64(time.Now().Add(24 * time.Hour).UnixMicro())
	if err := rdb.Set(ctx, d.lastKey("k"), fmt.Sprintf("x:%d:0:{}", ahead), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if tok := mustAcquire(t, d, "k", "a"); tok != ahead+1 {
		t.Fatalf("token %d, want %d", tok, ahead+1)
	}
	mustRelease(t, d, "k", "a")
	if tok := mustAcquire(t, d, "k", "b"); tok != ahead+2 {
		t.Fatalf("token %d, want %d", tok, ahead+2)
	}
}

// A record the driver did not write fails the acquisition rather than
// being read as some token, and nothing is taken.
func TestMalformedRecordFailsAcquisition(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	for _, bad := range []string{"x", "x:", "x:12a:0:{}", "x:0123:0:{}", "x:1e9:0:{}", "x:99999999999999999:0:{}", "x:9007199254740992:0:{}"} {
		if err := rdb.Set(ctx, d.lastKey("k"), bad, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
		if err == nil || !strings.Contains(err.Error(), "malformed lock value") {
			t.Errorf("record %q: %v, want a malformed-value error", bad, err)
		}
		if n := rdb.Exists(ctx, d.lockKey("k")).Val(); n != 0 {
			t.Fatalf("record %q: the lock was taken anyway", bad)
		}
	}
}

// The token lives in the lock value; a request sent twice — go-redis
// resends a command whose reply was lost — is acquired both times with the
// same token, and another owner is refused.
func TestRepeatedRequestKeepsItsToken(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	owner := driver.Owner{Host: "h", PID: 7, Meta: "m:x"}
	req := driver.AcquireRequest{Key: "k", ID: "a", TTL: 10 * time.Second, Owner: owner}
	first, err1 := d.Acquire(ctx, req)
	again, err2 := d.Acquire(ctx, req)
	if err1 != nil || err2 != nil || !first.Acquired || !again.Acquired || again.Token != first.Token {
		t.Fatalf("%+v %v, then %+v %v; want acquired twice with one token", first, err1, again, err2)
	}
	v := rdb.Get(ctx, d.lockKey("k")).Val()
	if want := fmt.Sprintf("a:%d:", first.Token); !strings.HasPrefix(v, want) {
		t.Fatalf("lock value %q, want it to start with %q", v, want)
	}
	info, ok, err := d.Inspect(ctx, "k")
	if err != nil || !ok || info.Token != first.Token || info.Owner != owner || time.Since(info.Since) > time.Minute {
		t.Fatalf("inspect: %+v, %v, %v", info, ok, err)
	}
	if other, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second}); err != nil || other.Acquired {
		t.Fatalf("another owner got the lock: %+v, %v", other, err)
	}
}

// A busy lock reports the holder's remaining TTL to a caller that waits,
// "unknown" to one that does not (sparing the PTTL) and for a key without
// expiry.
func TestBusyRetryAfter(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	mustAcquire(t, d, "k", "holder")
	res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "rival", TTL: time.Second, Waiting: true})
	if err != nil || res.Acquired || res.RetryAfter <= 9*time.Second || res.RetryAfter > 10*time.Second {
		t.Fatalf("waiting: %+v, %v; want busy, retry after about 10s", res, err)
	}
	before := commandStats(t, rdb)
	res, err = d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "rival", TTL: time.Second})
	if err != nil || res.Acquired || res.RetryAfter >= 0 || callsSince(t, rdb, before)["pttl"] != 0 {
		t.Fatalf("not waiting: %+v, %v, calls %v; want busy, unknown, no PTTL", res, err, callsSince(t, rdb, before))
	}
	if err := rdb.Set(ctx, d.lockKey("forever"), "x:1:0:{}", 0).Err(); err != nil {
		t.Fatal(err)
	}
	res, err = d.Acquire(ctx, driver.AcquireRequest{Key: "forever", ID: "rival", TTL: time.Second, Waiting: true})
	if err != nil || res.Acquired || res.RetryAfter >= 0 {
		t.Fatalf("no expiry: %+v, %v; want busy, unknown", res, err)
	}
	for pttl, want := range map[int64]time.Duration{ttlGone: 0, ttlUnknown: -1, 0: 0, 1500: 1500 * time.Millisecond} {
		if got := retryAfter(pttl); got != want {
			t.Errorf("retryAfter(%d) = %v, want %v", pttl, got, want)
		}
	}
}

// An acquisition is one script call and nothing else, also for a name
// acquired before. When the server lost the code, it is the call, the code
// sent again, and the call again (FUNCTION LOAD and FCALL; EVAL, which
// carries the script, after EVALSHA).
func TestAcquireIsOneScriptCall(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := srv.Client(t)
			d := newDriver(t, rdb, m.opts...)
			mustAcquire(t, d, "warm-up", "w") // loads the code into the server
			for i := range 3 {
				before := commandStats(t, rdb)
				mustAcquire(t, d, "k", fmt.Sprint("a", i))
				got := callsSince(t, rdb, before)
				// Commands run by the script are counted as well: MGET, TIME, SET.
				if got[m.call] != 1 || got["mget"] != 1 || got["time"] != 1 || got["set"] != 1 || len(got) != 4 {
					t.Fatalf("acquisition %d: %v", i, got)
				}
				mustRelease(t, d, "k", fmt.Sprint("a", i))
			}
			if err := m.lose(context.Background(), rdb); err != nil {
				t.Fatal(err)
			}
			before := commandStats(t, rdb)
			mustAcquire(t, d, "k", "b")
			want := map[string]int{m.call: 1, m.reload: 1}
			if m.reload == "function|load" {
				want[m.call] = 2
			}
			if got := callsSince(t, rdb, before); got[m.call] != want[m.call] || got[m.reload] != want[m.reload] {
				t.Fatalf("after the server lost the code: %v, want %v", got, want)
			}
		})
	}
}

// Owner ids the value format cannot carry, and TTLs Redis refuses, are
// invalid arguments, caught before anything is sent.
func TestAcquireRejectsBadArguments(t *testing.T) {
	srv := redisserver.Start(t)
	d := newDriver(t, srv.Client(t))
	ctx := context.Background()
	for _, req := range []driver.AcquireRequest{
		{Key: "k", ID: "", TTL: time.Second},
		{Key: "k", ID: "a:b", TTL: time.Second},
		{Key: "k", ID: "#h", TTL: time.Second}, // the queue's own fields start with '#'
		{Key: "k", ID: "a", TTL: 0},
		{Key: "k", ID: "a", TTL: time.Microsecond},
	} {
		if _, err := d.Acquire(ctx, req); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", req, err)
		}
	}
	if _, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "k", ID: "a"}, {Key: "k", ID: ""}}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("release with an empty id: %v, want ErrInvalid", err)
	}
	if _, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: "#", TTL: time.Second, Mode: driver.ModeShared}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("enqueue with id #: %v, want ErrInvalid", err)
	}
	if _, err := d.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "a", TTL: 0}}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("renew with ttl 0: %v, want ErrInvalid", err)
	}
}

package redisdriver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

var allScripts = []*script{acquireScript, releaseScript, renewScript, forceReleaseScript}

// Every script starts with the shared prelude, and every placeholder was
// replaced by its Go constant.
func TestScriptsShareThePreludeAndConstants(t *testing.T) {
	for _, s := range allScripts {
		if !strings.HasPrefix(s.src, "-- Prepended to every script") || !strings.Contains(s.src, "local function owns(v, idp)") {
			t.Errorf("%s: does not start with lib.lua", s.name)
		}
		if m := placeholder.FindString(s.src); m != "" {
			t.Errorf("%s: placeholder %s left", s.name, m)
		}
		if !strings.Contains(s.src, "local SEP = '"+sep+"'") || !strings.Contains(s.src, "'"+channelSuffix+"'") {
			t.Errorf("%s: Go constants not injected", s.name)
		}
	}
	for _, body := range []string{acquireLua, releaseLua, renewLua, forceReleaseLua} {
		if strings.Contains(body, "string.sub(v, 1") {
			t.Errorf("a script checks ownership by itself instead of calling owned:\n%s", body)
		}
	}
}

// A script's prelude keeps the helpers its body calls, directly or
// through another helper, and drops the others.
func TestScriptsDefineOnlyTheHelpersTheyCall(t *testing.T) {
	lib := "local A = 1\n" +
		"local function used(x)\n  return helper(x)\nend\n" +
		"local function helper(x)\n  return x .. A\nend\n" +
		"local function unused(x)\n  return used(x)\nend\n" +
		"local function used_suffix(x)\n  return x\nend\n"
	got := withoutUnused(lib, "return used(ARGV[1])")
	for _, want := range []string{"local A = 1", "local function used(", "local function helper("} {
		if !strings.Contains(got, want) {
			t.Errorf("prelude lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"local function unused(", "local function used_suffix("} {
		if strings.Contains(got, unwanted) {
			t.Errorf("prelude keeps %q, which the body never calls:\n%s", unwanted, got)
		}
	}
	// renew.lua checks ownership and nothing else.
	if strings.Contains(renewScript.src, "local function next_token(") || strings.Contains(renewScript.src, "local function queue_lib(") {
		t.Error("renew.lua defines helpers it never calls")
	}
}

// owned compares the whole id: an id that is a prefix of the holder's
// owns nothing, in any script that checks ownership.
func TestOwnedComparesTheWholeID(t *testing.T) {
	srv := redisserver.Start(t)
	d := newDriver(t, srv.Client(t))
	ctx := context.Background()
	tok := mustAcquire(t, d, "k", "ab")
	held, err := d.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "a", TTL: time.Second}})
	if err != nil || held[0] {
		t.Fatalf("renewal by id a of a lock held by ab: %v, %v", held, err)
	}
	if res := release(t, d, "k", "a"); res != driver.NotHeld {
		t.Fatalf("release by id a of a lock held by ab: %v", res)
	}
	if res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}); err != nil || res.Acquired {
		t.Fatalf("acquisition by id a of a lock held by ab: %+v, %v", res, err)
	}
	mustRelease(t, d, "k", "ab")
	if res := release(t, d, "k", "a"); res != driver.NotHeld {
		t.Fatalf("release by id a after ab released: %v, want NotHeld", res)
	}
	if next := mustAcquire(t, d, "k", "abc"); next <= tok {
		t.Fatalf("token %d after %d", next, tok)
	}
}

// The runner falls back to EVAL when the server has not cached a script,
// both for a direct call and inside a pipeline, and then EVALSHA works
// again.
func TestRunnerFallsBackToEval(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	probe := newScript("probe", "", "return KEYS[1] .. ARGV[1]")
	for round := range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := commandStats(t, rdb)
		if v, err := probe.run(ctx, rdb, []string{"a"}, "b").Text(); err != nil || v != "ab" {
			t.Fatalf("round %d, direct: %q, %v", round, v, err)
		}
		if got := callsSince(t, rdb, before); got["evalsha"] != 1 || got["eval"] != 1 {
			t.Fatalf("round %d, direct: calls %v, want one EVALSHA then one EVAL", round, got)
		}
		if v, err := probe.run(ctx, rdb, []string{"c"}, "d").Text(); err != nil || v != "cd" {
			t.Fatalf("round %d, direct, cached: %q, %v", round, v, err)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		calls := []*call{
			{s: probe, keys: []string{"x"}, args: []any{"1"}},
			{s: probe, keys: []string{"y"}, args: []any{"2"}},
		}
		before = commandStats(t, rdb)
		if err := runCalls(ctx, rdb.Pipeline(), calls); err != nil {
			t.Fatalf("round %d, pipeline: %v", round, err)
		}
		for i, want := range []string{"x1", "y2"} {
			if v, err := calls[i].reply.Text(); err != nil || v != want {
				t.Fatalf("round %d, pipeline call %d: %q, %v", round, i, v, err)
			}
		}
		got := callsSince(t, rdb, before)
		if got["evalsha"] != 2 || got["eval"] != 2 {
			t.Fatalf("round %d, pipeline: calls %v, want two EVALSHA then two EVAL", round, got)
		}
	}
}

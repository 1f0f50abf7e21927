package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// waitOutput polls until cond holds for p's stdout and returns it; it fails
// the test after timeout, or if p exits first.
func (p *proc) waitOutput(what string, timeout time.Duration, cond func(stdout string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := p.stdout.String()
		if cond(out) {
			return out
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s within %v; stdout %q, stderr %q", what, timeout, tail(out), tail(p.stderr.String()))
		}
		select {
		case <-p.done:
			p.t.Fatalf("dlock exited with %d before %s; stdout %q, stderr %q", p.code, what, tail(p.stdout.String()), tail(p.stderr.String()))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// takeLock acquires name on rdb with a Client of the test's own and
// returns the lease; it is released when the test ends.
func takeLock(t *testing.T, rdb *redis.Client, name string) *dl.Lease {
	t.Helper()
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dl.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := c.Lock(ctx, name, dl.WithMeta("watched"))
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// fieldLine reports whether text has a line whose first two fields are
// name and value ("token:  42 (...)").
func fieldLine(text, name, value string) bool {
	for _, l := range strings.Split(text, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == name && f[1] == value {
			return true
		}
	}
	return false
}

// tail is the end of s, for failure messages about long outputs.
func tail(s string) string {
	if len(s) > 1500 {
		return "..." + s[len(s)-1500:]
	}
	return s
}

// refreshes splits status --watch's text output at its timestamp lines.
func refreshes(out string) []string {
	parts := strings.Split(out, "--- ")
	if len(parts) > 0 && parts[0] == "" {
		parts = parts[1:]
	}
	return parts
}

func TestStatusWatchShowsTheLockChanging(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	p := start(t, url, "status", "--watch=100ms", "job")
	p.waitOutput("a refresh of the free lock", 10*time.Second, func(out string) bool {
		return strings.Contains(out, `lock "job" is not held`)
	})
	lease := takeLock(t, rdb, "job")
	tok := strconv.FormatUint(lease.Token(), 10)
	out := p.waitOutput("a refresh of the held lock", 10*time.Second, func(out string) bool {
		return fieldLine(out, "token:", tok)
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("status --watch after SIGINT: status %d, want 0; stderr %q", code, p.stderr.String())
	}
	if stderr := p.stderr.String(); stderr != "" {
		t.Errorf("stderr %q, want nothing", stderr)
	}
	// Every refresh is a timestamp line and then either the free lock's
	// line or the holder; the free ones come first.
	rs := refreshes(out)
	if len(rs) < 2 {
		t.Fatalf("%d refreshes, want at least 2:\n%s", len(rs), tail(out))
	}
	sawHeld := false
	for _, r := range rs {
		stamp, body, _ := strings.Cut(r, "\n")
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || !strings.HasSuffix(stamp, "Z") {
			t.Errorf("timestamp line %q: not RFC 3339 UTC (%v)", stamp, err)
		}
		held := fieldLine(body, "token:", tok) && fieldLine(body, "meta:", "watched")
		free := body == "lock \"job\" is not held\n"
		switch {
		case !held && !free:
			t.Errorf("refresh neither free nor held by the test's lease:\n%s", body)
		case free && sawHeld:
			t.Errorf("a free refresh after a held one (nobody released):\n%s", tail(out))
		}
		sawHeld = sawHeld || held
	}
}

func TestStatusWatchJSONIsOneObjectPerLine(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	p := start(t, url, "status", "--json", "--watch=100ms", "job")
	p.waitOutput("a JSON refresh", 10*time.Second, func(out string) bool { return strings.Contains(out, "\n") })
	lease := takeLock(t, rdb, "job")
	wantTok := `"token":` + strconv.FormatUint(lease.Token(), 10) + `,`
	out := p.waitOutput("a JSON refresh of the held lock", 10*time.Second, func(out string) bool {
		return strings.Contains(out, wantTok)
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("status --watch --json after SIGTERM: status %d, want 0; stderr %q", code, p.stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 {
		t.Fatalf("%d lines, want at least 2: %q", len(lines), out)
	}
	var first, last struct {
		Key   string  `json:"key"`
		Held  bool    `json:"held"`
		Token *uint64 `json:"token"`
	}
	for i, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %d is not one JSON object: %q (%v)", i+1, l, err)
		}
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if first.Key != "job" || first.Held || first.Token != nil {
		t.Errorf("first refresh %q, want the free lock", lines[0])
	}
	if last.Key != "job" || !last.Held || last.Token == nil || *last.Token != lease.Token() {
		t.Errorf("last refresh %q, want the test's lease (token %d)", lines[len(lines)-1], lease.Token())
	}
}

func TestStatusWatchGoesOnAfterAStoreError(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	p := start(t, "redis://"+proxy.Addr()+"/0", "status", "--json", "--watch=100ms", "--timeout", "300ms", "job")
	p.waitOutput("a JSON refresh", 10*time.Second, func(out string) bool { return strings.Contains(out, "\n") })
	proxy.Blackhole(true)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.stderr.String(), "no answer from the store within 300ms") {
		if time.Now().After(deadline) {
			t.Fatalf("no error line while the store was cut off; stderr %q", p.stderr.String())
		}
		select {
		case <-p.done:
			t.Fatalf("dlock exited with %d on a store error; stderr %q", p.code, p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	oneLine(t, strings.SplitAfter(p.stderr.String(), "\n")[0])
	proxy.Blackhole(false)
	proxy.CloseAll() // the dropped bytes left the old connections unusable
	lease := takeLock(t, srv.Client(t), "job")
	wantTok := `"token":` + strconv.FormatUint(lease.Token(), 10) + `,`
	p.waitOutput("a refresh after the store came back", 10*time.Second, func(out string) bool {
		return strings.Contains(out, wantTok)
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 0 {
		t.Fatalf("status --watch after SIGINT: status %d, want 0; stderr %q", code, p.stderr.String())
	}
}

func TestStatusWatchUsageErrors(t *testing.T) {
	t.Parallel()
	url := closedURL(t) // refused before any round trip
	for _, args := range [][]string{
		{"status", "--watch=50ms", "job"},
		{"status", "--watch=soon", "job"},
		{"status", "--watch", "job", "more"},
		{"status", "--watch", ""},
	} {
		code, _, stderr := dlock(t, url, args...)
		if code != 64 {
			t.Errorf("%q: status %d, want 64; stderr %q", args, code, stderr)
		}
		oneLine(t, stderr)
	}
	// DLOCK_WATCH is not read: a plain status returns (69: nothing listens).
	code, _, stderr := dlockEnv(t, url, []string{"DLOCK_WATCH=1", "DLOCK_TIMEOUT=1"}, "status", "job")
	if code != 69 {
		t.Errorf("status with DLOCK_WATCH=1: status %d, want 69 at once; stderr %q", code, stderr)
	}
}

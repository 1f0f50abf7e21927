package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// quorumTTL is the TTL of the runs on a quorum: a master counts in a vote
// only once it has been up for longer (redisdriver.Quorum: a master that
// restarted may have lost the locks it held), so the test waits for that
// much uptime, not the default TTL's 30 s.
const quorumTTL = time.Second

// waitUptime polls rdb's server until it has been up for more than d.
func waitUptime(t *testing.T, rdb *redis.Client, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d + 10*time.Second); ; time.Sleep(50 * time.Millisecond) {
		if up, err := rdb.Info(context.Background(), "server").Result(); err == nil {
			for line := range strings.SplitSeq(up, "\r\n") {
				if v, ok := strings.CutPrefix(line, "uptime_in_seconds:"); ok {
					if s, err := strconv.Atoi(v); err == nil && time.Duration(s)*time.Second > d {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server was not up for %v within %v", d, d+10*time.Second)
		}
	}
}

// dlock run on a quorum of three independent masters, given as a
// DLOCK_REDIS list or as repeated --redis flags (before and after the
// command name): the lock is held on a majority of them while the command
// runs, a second run cannot take it, and the next run's token is larger.
// The store has no queue: runs wait the plain way.
func TestRunOnAQuorum(t *testing.T) {
	t.Parallel()
	var urls []string
	var rdbs []*redis.Client
	for range 3 {
		u, rdb := server(t)
		urls, rdbs = append(urls, u), append(rdbs, rdb)
	}
	for _, rdb := range rdbs {
		waitUptime(t, rdb, quorumTTL)
	}
	const name = "quorum-job"
	ttl := "--ttl=" + quorumTTL.String()
	_, first, stop := holdLock(t, strings.Join(urls, " "), name, ttl)
	held := 0
	for _, rdb := range rdbs {
		if rdb.Exists(context.Background(), lockKey(name)).Val() == 1 {
			held++
		}
	}
	if held < 2 {
		t.Fatalf("the lock is on %d of 3 masters while the command runs, want a majority", held)
	}
	flags := []string{"--redis", urls[0], "run", "--redis", urls[1], "--redis", urls[2], ttl}
	code, _, stderr := dlock(t, "", append(flags, "--wait", "0", name, "--", "true")...)
	if code != 75 {
		t.Fatalf("a second run on the quorum: status %d, want 75 (not acquired); stderr %q", code, stderr)
	}
	// The operators' view is the majority's: status and list show the
	// holder and its token.
	for _, args := range [][]string{{"status", "--json", name}, {"list", "--json"}} {
		code, stdout, stderr := dlock(t, strings.Join(urls, " "), args...)
		if code != 0 || !strings.Contains(stdout, `"token": `+strconv.FormatUint(first, 10)+",") {
			t.Errorf("%v on a quorum: status %d, stdout %q, stderr %q; want the holder with token %d", args, code, stdout, stderr, first)
		}
	}
	// What a quorum cannot do (it has no queue) is a usage error, said in
	// one line.
	code, _, stderr = dlock(t, strings.Join(urls, " "), "run", "--shared", name, "--", "true")
	if code != 64 || !strings.Contains(stderr, "not supported") {
		t.Errorf("run --shared on a quorum: status %d, want 64; stderr %q", code, stderr)
	}
	oneLine(t, stderr)
	if code := stop(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	out := filepath.Join(t.TempDir(), "token")
	code, _, stderr = dlock(t, "", append(flags, name, "--", "sh", "-c", `echo "$DLOCK_TOKEN" > `+out)...)
	if code != 0 {
		t.Fatalf("a run after the holder's: status %d; stderr %q", code, stderr)
	}
	next, err := strconv.ParseUint(waitFile(t, out, 10*time.Second), 10, 64)
	if err != nil || next <= first {
		t.Fatalf("token %d after %d: want a larger one (%v)", next, first, err)
	}
}

// The same master twice in a quorum would have two votes: a usage error,
// and nothing is run.
func TestQuorumWithAURLTwiceIsAUsageError(t *testing.T) {
	t.Parallel()
	u, _ := server(t)
	other, _ := server(t)
	code, _, stderr := dlock(t, u+" "+other+" "+u, "run", "k", "--", "true")
	if code != 64 || !strings.Contains(stderr, "given twice") {
		t.Fatalf("status %d, want 64; stderr %q", code, stderr)
	}
	oneLine(t, stderr)
}

package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRunPassesStatusThrough(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	for _, tc := range []struct {
		name string
		cmd  []string
		want int
	}{
		{"success", []string{"true"}, 0},
		{"failure", []string{"sh", "-c", "exit 7"}, 7},
		{"killed by a signal", []string{"sh", "-c", "kill -9 $$"}, 128 + 9},
		{"not found", []string{"/nonexistent/command"}, 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := dlock(t, url, append([]string{"run", "job", "--"}, tc.cmd...)...)
			if code != tc.want {
				t.Fatalf("status %d, want %d; stderr %q", code, tc.want, stderr)
			}
			if tc.want < 64 && stderr != "" {
				t.Errorf("dlock wrote %q for the command's own status", stderr)
			}
			if lockHeld(t, rdb, "job") {
				t.Fatal("lock still held after run exited")
			}
		})
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	// A closed port: usage errors must be reported without touching Redis.
	url := closedURL(t)
	for _, args := range [][]string{
		{},
		{"nope"},
		{"--nope"},
		{"run"},
		{"run", "job"},
		{"run", "job", "--"},
		{"run", "", "--", "true"},
		{"run", "--ttl", "abc", "job", "--", "true"},
		{"run", "--ttl", "0", "job", "--", "true"},
		{"run", "--ttl", "-1s", "job", "--", "true"},
		{"run", "--ttl", "5ms", "job", "--", "true"}, // below the Redis driver's minimum TTL (20ms)
		{"run", "--wait", "soon", "job", "--", "true"},
		{"run", "--wait", "-1s", "job", "--", "true"},
		{"run", "--grace", "-1s", "job", "--", "true"},
		{"run", "--nope", "job", "--", "true"},
		{"run", "--redis", "http://127.0.0.1:6379", "job", "--", "true"},
		{"--redis", "redis+sentinel://127.0.0.1:26379", "run", "job", "--", "true"}, // no master name
		{"run", "--redis", "redis+cluster://127.0.0.1:7000/3", "job", "--", "true"},
		{"status"},
		{"status", ""},
		{"status", "a", "b"},
		{"list", "a", "b"},
		{"unlock", "job"}, // no --force
		{"unlock", "--force"},
		{"demo", "--workers", "1"},
		{"demo", "--orders", "many"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, stderr := dlock(t, url, args...)
			if code != 64 {
				t.Fatalf("status %d, want 64; stderr %q", code, stderr)
			}
			oneLine(t, stderr)
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "run"},
		{"run", "--help"}, {"status", "--help"}, {"list", "--help"},
		{"unlock", "--help"}, {"demo", "--help"}, {"completion", "--help"}, {"version", "--help"},
		{"help", "completion"}, {"run", "-h"},
	} {
		code, stdout, stderr := dlock(t, url, args...)
		if code != 0 || !strings.Contains(stdout, "Usage: dlock") || stderr != "" {
			t.Errorf("dlock %v: status %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestBackendUnreachable(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, args := range [][]string{
		{"run", "job", "--", "true"},
		{"run", "--wait", "0", "job", "--", "true"},
		{"status", "job"},
		{"list"},
		{"unlock", "--force", "job"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			code, _, stderr := dlock(t, url, args...)
			if code != 69 {
				t.Fatalf("status %d, want 69; stderr %q", code, stderr)
			}
			oneLine(t, stderr)
		})
	}
}

func TestRunSetsKeyAndTokenInEnvironment(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	dir := t.TempDir()
	var last uint64
	for i := range 2 {
		out := filepath.Join(dir, strconv.Itoa(i))
		code, _, stderr := dlock(t, url, "run", "env-job", "--", "sh", "-c", `echo "$DLOCK_KEY $DLOCK_TOKEN" > `+out)
		if code != 0 {
			t.Fatalf("status %d; stderr %q", code, stderr)
		}
		key, tok, _ := strings.Cut(waitFile(t, out, time.Second), " ")
		if key != "env-job" {
			t.Fatalf("DLOCK_KEY=%q", key)
		}
		token, err := strconv.ParseUint(tok, 10, 64)
		if err != nil || token <= last {
			t.Fatalf("DLOCK_TOKEN=%q after %d: want a larger decimal", tok, last)
		}
		last = token
	}
}

// holdLock starts a dlock run that holds name until the test ends or stop
// is called, and returns once the lock is held and the command runs.
func holdLock(t *testing.T, url string, name string, args ...string) (p *proc, token uint64, stop func() int) {
	t.Helper()
	dir := t.TempDir()
	tokFile, stopFile := filepath.Join(dir, "token"), filepath.Join(dir, "stop")
	script := `echo "$DLOCK_TOKEN" > ` + tokFile + `; while [ ! -e ` + stopFile + ` ]; do sleep 0.02; done`
	p = start(t, url, append(append([]string{"run"}, args...), name, "--", "sh", "-c", script)...)
	token, err := strconv.ParseUint(waitFile(t, tokFile, 10*time.Second), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return p, token, func() int {
		if err := writeFile(stopFile); err != nil {
			t.Fatal(err)
		}
		return p.wait(10 * time.Second)
	}
}

// waitSubscribed polls until a dlock run is waiting for the lock: queued
// in the store (Lock's default on Redis), or following the lock's release
// notifications (a plain wait).
func waitSubscribed(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	ch, queue := lockKey(name)+":released", lockKey(name)+":w"
	deadline := time.Now().Add(10 * time.Second)
	for rdb.LLen(ctx, queue).Val() == 0 && rdb.PubSubNumSub(ctx, ch).Val()[ch] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nobody waits for %q", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunNotAcquired(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	_, _, stop := holdLock(t, url, "busy")

	code, _, stderr := dlock(t, url, "run", "--wait", "0", "busy", "--", "true")
	if code != 75 {
		t.Fatalf("--wait 0: status %d, want 75; stderr %q", code, stderr)
	}
	oneLine(t, stderr)

	began := time.Now()
	code, _, stderr = dlock(t, url, "run", "--wait", "300ms", "busy", "--", "true")
	if code != 75 {
		t.Fatalf("--wait 300ms: status %d, want 75; stderr %q", code, stderr)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before --wait ran out", waited)
	}
	oneLine(t, stderr)

	// A signal ends an unbounded wait: 128+N, and no lock taken.
	waiter := start(t, url, "run", "busy", "--", "true")
	waitSubscribed(t, rdb, "busy")
	if err := waiter.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waiter.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) || !strings.Contains(waiter.stderr.String(), "waiting") {
		t.Fatalf("interrupted waiter: status %d, stderr %q", code, waiter.stderr.String())
	}

	// A waiter gets the lock as soon as the holder's command ends.
	waiter = start(t, url, "run", "--wait", "20s", "busy", "--", "true")
	if code := stop(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	if code := waiter.wait(20 * time.Second); code != 0 {
		t.Fatalf("waiter: status %d; stderr %q", code, waiter.stderr.String())
	}
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	dir := t.TempDir()
	ready, during := filepath.Join(dir, "ready"), filepath.Join(dir, "during")
	// On SIGTERM the command checks that it still holds the lock, then
	// exits 3: dlock must pass that on and release only afterwards. The
	// nested dlock is given the store: COMMAND does not inherit DLOCK_REDIS.
	script := `trap '"$DLOCK_BIN" --redis ` + url + ` status sig > ` + during + `; echo "rc=$?" >> ` + during + `; exit 3' TERM
echo ready > ` + ready + `
sleep 60 & wait`
	p := start(t, url, "run", "sig", "--", "sh", "-c", script)
	waitFile(t, ready, 10*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 3 {
		t.Fatalf("status %d, want the command's 3; stderr %q", code, p.stderr.String())
	}
	if got := waitFile(t, during, time.Second); !strings.HasSuffix(got, "rc=0") {
		t.Fatalf("lock not held while the command handled SIGTERM: %q", got)
	}
	if code, _, _ := dlock(t, url, "status", "sig"); code != 1 {
		t.Fatalf("status after run: %d, want 1 (released)", code)
	}

	// SIGINT reaches a command that does not trap it: it dies by it.
	ready2 := filepath.Join(dir, "ready2")
	p = start(t, url, "run", "sig", "--", "sh", "-c", "echo ready > "+ready2+"; exec sleep 60")
	waitFile(t, ready2, 10*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("status %d, want %d", code, 128+int(syscall.SIGINT))
	}
}

// lostScript starts a grandchild under sh and records both pids.
func lostScript(dir, prelude string) (script, shPID, gcPID string) {
	shPID, gcPID = filepath.Join(dir, "sh.pid"), filepath.Join(dir, "gc.pid")
	return prelude + `echo $$ > ` + shPID + `; sleep 60 & echo $! > ` + gcPID + `; wait`, shPID, gcPID
}

func TestRunLostLockTerminatesProcessGroup(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	script, shFile, gcFile := lostScript(t.TempDir(), "")
	p := start(t, url, "run", "--ttl", "300ms", "lost", "--", "sh", "-c", script)
	sh, gc := pidFile(t, shFile), pidFile(t, gcFile)
	// Someone deletes the lock behind dlock's back.
	if err := rdb.Del(context.Background(), lockKey("lost")).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 76 {
		t.Fatalf("status %d, want 76; stderr %q", code, p.stderr.String())
	}
	oneLine(t, p.stderr.String())
	waitGone(t, sh, time.Second)
	waitGone(t, gc, time.Second)
}

func TestRunLostLockKillsAfterGrace(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	// The shell and its child ignore SIGTERM: only SIGKILL ends them.
	script, shFile, gcFile := lostScript(t.TempDir(), `trap "" TERM; `)
	const grace = 300 * time.Millisecond
	p := start(t, url, "run", "--ttl", "300ms", "--grace", grace.String(), "stubborn", "--", "sh", "-c", script)
	sh, gc := pidFile(t, shFile), pidFile(t, gcFile)
	began := time.Now()
	if err := rdb.Del(context.Background(), lockKey("stubborn")).Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(10 * time.Second); code != 76 {
		t.Fatalf("status %d, want 76; stderr %q", code, p.stderr.String())
	}
	if took := time.Since(began); took < grace {
		t.Fatalf("killed after %v, before the grace period of %v", took, grace)
	}
	waitGone(t, sh, time.Second)
	waitGone(t, gc, time.Second)
}

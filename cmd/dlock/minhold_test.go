package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunMinHold: with --min-hold, a command that ends early leaves the
// lock held until the window (from acquisition) is over; dlock then
// releases it and exits with the command's status.
func TestRunMinHold(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	const window = 1500 * time.Millisecond
	done := filepath.Join(t.TempDir(), "done")
	began := time.Now() // before dlock acquires: the window ends after began+window
	p := start(t, url, "run", "--min-hold", window.String(), "window", "--", "sh", "-c", "echo $$ > "+done+"; exit 3")
	sh := pidFile(t, done)
	waitGone(t, sh, 5*time.Second)
	// The command is over; the window is not.
	code, _, stderr := dlock(t, url, "run", "-n", "window", "--", "true")
	if code != 75 {
		if time.Since(began) < window {
			t.Fatalf("second run inside the window: status %d, want 75; stderr %q", code, stderr)
		}
		t.Skipf("the machine is too slow to check inside a %v window", window)
	}
	if code := p.wait(10 * time.Second); code != 3 {
		t.Fatalf("status %d, want the command's 3; stderr %q", code, p.stderr.String())
	}
	if took := time.Since(began); took < window {
		t.Fatalf("dlock exited after %v, before --min-hold %v", took, window)
	}
	if lockHeld(t, rdb, "window") {
		t.Fatal("lock still held after the window ended and dlock exited")
	}
	if p.stderr.String() != "" {
		t.Errorf("dlock wrote %q", p.stderr.String())
	}
}

// minHoldRun starts a run whose command ends at once, under a long
// --min-hold, and returns once the command is gone, i.e. dlock holds the
// lock for the window alone.
func minHoldRun(t *testing.T, url, key string, ttl time.Duration) *proc {
	t.Helper()
	done := filepath.Join(t.TempDir(), "done")
	p := start(t, url, "run", "--ttl", ttl.String(), "--min-hold", "1m", key, "--", "sh", "-c", "echo $$ > "+done)
	waitGone(t, pidFile(t, done), 5*time.Second)
	return p
}

// TestRunMinHoldKilled: when dlock is killed during --min-hold, the lock
// is not released: it stays until its TTL, counted from the last
// renewal, runs out — at least 2/3 of --ttl after the kill, since renewals
// come every TTL/3 — and then frees itself.
func TestRunMinHoldKilled(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	const ttl = 3 * time.Second
	p := minHoldRun(t, url, "killed-window", ttl)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(5 * time.Second)
	killed := time.Now()
	left := rdb.PTTL(context.Background(), lockKey("killed-window")).Val()
	// A renewal's round trip on loopback, and its scheduling under -race
	// on a busy machine, fit well in the 250ms margin.
	if left < ttl*2/3-250*time.Millisecond || left > ttl {
		t.Fatalf("lock TTL left just after the kill: %v, want between 2/3 of %v and %v", left, ttl, ttl)
	}
	if code, _, stderr := dlock(t, url, "run", "-n", "killed-window", "--", "true"); code != 75 {
		t.Fatalf("run right after the kill: status %d, want 75; stderr %q", code, stderr)
	}
	for lockHeld(t, rdb, "killed-window") {
		if time.Since(killed) > ttl+time.Second {
			t.Fatalf("lock still held %v after the kill, with --ttl %v", time.Since(killed), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunMinHoldSignalled: SIGTERM during --min-hold ends dlock without
// releasing (128+15, one line saying so); the lock expires with its TTL.
func TestRunMinHoldSignalled(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	const ttl = 2 * time.Second
	p := minHoldRun(t, url, "stopped-window", ttl)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(5 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("status %d, want %d; stderr %q", code, 128+int(syscall.SIGTERM), p.stderr.String())
	}
	stopped := time.Now()
	oneLine(t, p.stderr.String())
	if !strings.Contains(p.stderr.String(), "not released") {
		t.Errorf("stderr %q does not say the lock was left in place", p.stderr.String())
	}
	if !lockHeld(t, rdb, "stopped-window") {
		t.Fatal("SIGTERM during --min-hold released the lock")
	}
	for lockHeld(t, rdb, "stopped-window") {
		if time.Since(stopped) > ttl+time.Second {
			t.Fatalf("lock still held %v after dlock stopped, with --ttl %v", time.Since(stopped), ttl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

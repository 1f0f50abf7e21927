//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStoppedCommandWithoutTerminal: with no terminal (cron, systemd),
// a COMMAND stopped by a signal dlock did not send has no job control to
// resume it. dlock keeps the lock for it at most a TTL: continued within
// it, COMMAND runs on under the lock; still stopped after it, its group
// is ended, the lock released (at once, whatever --min-hold), and dlock
// exits 76.
func TestRunStoppedCommandWithoutTerminal(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)

	t.Run("continued within a TTL", func(t *testing.T) {
		t.Parallel()
		shFile := filepath.Join(t.TempDir(), "sh.pid")
		p := start(t, url, "run", "--ttl", "10s", "stopped-resumed", "--", "sh", "-c",
			`echo $$ > `+shFile+`; kill -STOP $$; echo resumed`)
		sh := pidFile(t, shFile)
		waitState(t, sh, 'T', false, 5*time.Second)
		if err := syscall.Kill(sh, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(10 * time.Second); code != 0 || !strings.Contains(p.stdout.String(), "resumed") {
			t.Fatalf("status %d, stdout %q; want 0 and COMMAND's output", code, p.stdout.String())
		}
	})

	t.Run("still stopped after a TTL", func(t *testing.T) {
		t.Parallel()
		shFile := filepath.Join(t.TempDir(), "sh.pid")
		began := time.Now()
		// --min-hold is not applied to a COMMAND dlock gave up on.
		p := start(t, url, "run", "--ttl", "1s", "--grace", "300ms", "--min-hold", "1m", "stopped-ended", "--", "sh", "-c",
			`echo $$ > `+shFile+`; kill -STOP $$; echo resumed`)
		sh := pidFile(t, shFile)
		waitState(t, sh, 'T', false, 5*time.Second)
		code := p.wait(10 * time.Second)
		took := time.Since(began)
		if code != 76 {
			t.Fatalf("status %d, want 76; stderr %q", code, p.stderr.String())
		}
		oneLine(t, p.stderr.String())
		if !strings.Contains(p.stderr.String(), "stayed stopped") {
			t.Errorf("stderr %q does not say COMMAND stayed stopped", p.stderr.String())
		}
		if strings.Contains(p.stdout.String(), "resumed") {
			t.Error("COMMAND ran on after dlock gave up its lock")
		}
		if took < time.Second {
			t.Errorf("gave up after %v, before a TTL (1s)", took)
		}
		waitGone(t, sh, 2*time.Second)
		if lockHeld(t, rdb, "stopped-ended") {
			t.Error("lock still held after dlock gave up")
		}
	})
}

package main

// Integration tests for the ways "dlock run" could let its command run
// without the lock: arguments taken for the wrong thing, processes left
// behind by the command, and dlock itself dying.

import (
	"strings"
	"testing"
	"time"
)

func TestRunDoubleDash(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)

	// The first word after "--" is never KEY.
	code, stdout, stderr := dlock(t, url, "run", "--", "echo", "hi")
	if code != 64 || !strings.Contains(stderr, "missing KEY") || stdout != "" {
		t.Fatalf("run -- echo hi: status %d, stdout %q, stderr %q; want 64, missing KEY", code, stdout, stderr)
	}
	oneLine(t, stderr)
	if n := rdb.Exists(t.Context(), lockKey("echo")).Val(); n != 0 {
		t.Fatal(`"echo" was taken for KEY: its lock key is in Redis`)
	}

	for _, args := range [][]string{
		{"run", "k", "--"},
		{"run", "k", "--wait", "0", "--"},
		{"run", "k", "--wait", "0", "true"}, // a flag after KEY without "--"
		{"run", "k", "j", "--", "true"},     // two KEYs
	} {
		code, _, stderr := dlock(t, url, args...)
		if code != 64 {
			t.Errorf("%q: status %d, want 64; stderr %q", args, code, stderr)
		}
		oneLine(t, stderr)
	}

	// A flag after KEY and before "--" is honoured, not run as COMMAND.
	if code, _, stderr := dlock(t, url, "run", "k", "--wait", "0", "--", "true"); code != 0 {
		t.Fatalf("run k --wait 0 -- true on a free lock: status %d, stderr %q", code, stderr)
	}
	_, _, stop := holdLock(t, url, "k")
	began := time.Now()
	code, _, stderr = dlock(t, url, "run", "k", "--wait", "0", "--", "true")
	if code != 75 {
		t.Fatalf("run k --wait 0 -- true on a held lock: status %d, want 75; stderr %q", code, stderr)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("--wait 0 after KEY was not honoured: gave up after %v", took)
	}
	if code := stop(); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
}

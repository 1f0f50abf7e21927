package main

// Integration tests for the ways "dlock run" could let its command run
// without the lock: arguments taken for the wrong thing, processes left
// behind by the command, and dlock itself dying.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
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

// TestRunEndsBackgroundMembers: a command that exits leaving a job in its
// process group does not release the lock while that job lives; dlock
// ends the job (SIGTERM, then SIGKILL after --grace) and releases after.
func TestRunEndsBackgroundMembers(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	for _, tc := range []struct {
		name, prelude string
		minTook       time.Duration // the job ignores SIGTERM: it ends by SIGKILL, after --grace
	}{
		{"ends on SIGTERM", "", 0},
		{"ignores SIGTERM", `trap "" TERM; `, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := "bg-" + strings.ReplaceAll(tc.name, " ", "-")
			gcFile := filepath.Join(t.TempDir(), "gc.pid")
			began := time.Now() // before dlock can send SIGTERM
			p := start(t, url, "run", "--grace", "500ms", key, "--", "sh", "-c",
				tc.prelude+`sleep 30 & echo $! > `+gcFile+`; exit 0`)
			gc := pidFile(t, gcFile)
			t.Cleanup(func() { _ = syscall.Kill(gc, syscall.SIGKILL) })

			// A second run must not get the lock while the job lives.
			code, _, stderr := dlock(t, url, "run", "--wait", "0", key, "--", "true")
			if code == 0 && alive(gc) {
				t.Fatal("a second run got the lock while the first run's background job was alive")
			}
			if code != 0 && code != 75 {
				t.Fatalf("second run: status %d; stderr %q", code, stderr)
			}
			// Never free while the job lives: a free lock seen before
			// the job is seen alive means they overlapped.
			for {
				free := !lockHeld(t, rdb, key)
				if free && alive(gc) {
					t.Fatal("lock released while the command's background job was alive")
				}
				if free {
					break
				}
				select {
				case <-p.done:
				case <-time.After(10 * time.Millisecond):
				}
				if time.Since(began) > 10*time.Second {
					t.Fatal("lock still held 10s after the command exited")
				}
			}
			if code := p.wait(10 * time.Second); code != 0 {
				t.Fatalf("status %d, want the command's 0; stderr %q", code, p.stderr.String())
			}
			if alive(gc) {
				t.Fatal("dlock exited while the command's background job was alive")
			}
			if took := time.Since(began); took < tc.minTook {
				t.Fatalf("job ignoring SIGTERM ended after %v, before --grace", took)
			}
			if !strings.Contains(p.stderr.String(), "leaving processes") {
				t.Errorf("no warning about the leftover job: %q", p.stderr.String())
			}
		})
	}
}

// TestRunKilledDlockKillsCommand: SIGKILL of dlock alone (an OOM kill,
// timeout -s KILL, systemd's KillMode=process), or of dlock's whole
// process group, must not leave COMMAND or the processes it started
// running without the lock.
func TestRunKilledDlockKillsCommand(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	for _, tc := range []struct {
		name  string
		group bool // kill dlock's process group rather than its pid
	}{
		{"dlock's pid", false},
		{"dlock's process group", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script, shFile, gcFile := lostScript(t.TempDir(), "")
			// No pipes to dlock: its Wait must not wait for a survivor
			// holding them.
			cmd := exec.Command(dlockBin, "run", "killed-"+strconv.FormatBool(tc.group), "--", "sh", "-c", script)
			cmd.Env = append(environWithout("DLOCK_REDIS"), "DLOCK_REDIS="+url)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: tc.group}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sh, gc := pidFile(t, shFile), pidFile(t, gcFile)
			t.Cleanup(func() { _ = syscall.Kill(-sh, syscall.SIGKILL) })
			// dlock tells its watcher the group just after COMMAND has
			// started (until then only the parent-death signal covers
			// COMMAND alone); the watcher then shows it in its arguments.
			waitWatcher(t, sh, 10*time.Second)
			target := cmd.Process.Pid
			if tc.group {
				target = -target
			}
			if err := syscall.Kill(target, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("dlock ended with %v, not by SIGKILL", cmd.ProcessState)
			}
			waitGone(t, sh, 2*time.Second)
			waitGone(t, gc, 2*time.Second)
		})
	}
}

// TestRunUnreachableFailsFast: a refused connection is reported (69)
// within a second, whether or not the user asked to wait. This is a hang
// check; the bound is generous.
func TestRunUnreachableFailsFast(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, args := range [][]string{
		{"run", "--redis", url, "--wait", "0", "k", "--", "true"},
		{"run", "--redis", url, "k", "--", "true"},
		{"run", "--redis", url, "--wait", "1m", "k", "--", "true"},
	} {
		began := time.Now()
		code, _, stderr := dlock(t, url, args...)
		took := time.Since(began)
		if code != 69 {
			t.Fatalf("%q: status %d, want 69; stderr %q", args, code, stderr)
		}
		oneLine(t, stderr)
		if took > time.Second {
			t.Errorf("%q: reported an unreachable store after %v, want < 1s", args, took)
		}
	}
}

// procState returns the state letter of pid from /proc (R, S, T, Z, ...),
// or 0 if it cannot be read.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// waitState polls until pid is (or, with not set, is no longer) in state.
func waitState(t *testing.T, pid int, state byte, not bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for (procState(pid) == state) == not {
		if time.Now().After(deadline) {
			t.Fatalf("process %d: state %q after %v (want %s%q)", pid, procState(pid), timeout, map[bool]string{true: "not ", false: ""}[not], state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunJobControl: Ctrl-Z (SIGTSTP to dlock) stops COMMAND's group as
// well as dlock, so a lock that expires meanwhile covers no running
// command; SIGCONT resumes COMMAND only while the lock is still held.
func TestRunJobControl(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads process states from /proc")
	}
	t.Parallel()
	url, rdb := server(t)

	// ctrlZ sends dlock SIGTSTP and waits until both the command's shell
	// (pid sh) and dlock are stopped; SIGCONT undoes it at the end.
	ctrlZ := func(t *testing.T, p *proc, sh int) {
		t.Helper()
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
		if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
			t.Fatal(err)
		}
		waitState(t, sh, 'T', false, 5*time.Second)
		waitState(t, p.cmd.Process.Pid, 'T', false, 5*time.Second)
	}

	t.Run("resumed in time", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		shFile := filepath.Join(dir, "sh.pid")
		// exec: a shell stopped while it forks can show state D, not T.
		p := start(t, url, "run", "--ttl", "10s", "jc-resumed", "--", "sh", "-c",
			`echo $$ > `+shFile+`; exec sleep 60`)
		sh := pidFile(t, shFile)
		ctrlZ(t, p, sh)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		waitState(t, sh, 'T', true, 5*time.Second)
		// Still under the lock, and still forwarding: SIGTERM ends it.
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(10 * time.Second); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("status %d, want %d; stderr %q", code, 128+int(syscall.SIGTERM), p.stderr.String())
		}
	})

	t.Run("lock expired while stopped", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		shFile := filepath.Join(dir, "sh.pid")
		p := start(t, url, "run", "--ttl", "300ms", "--grace", "300ms", "jc-expired", "--", "sh", "-c",
			`echo $$ > `+shFile+`; exec sleep 60`)
		sh := pidFile(t, shFile)
		ctrlZ(t, p, sh)
		// Stopped, dlock no longer renews: the lock expires, and the
		// command must still be stopped once it has.
		deadline := time.Now().Add(10 * time.Second)
		for lockHeld(t, rdb, "jc-expired") {
			if time.Now().After(deadline) {
				t.Fatal("a stopped dlock still holds the lock after 10s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if st := procState(sh); st != 'T' {
			t.Fatalf("the lock expired while the command was in state %q, not stopped", st)
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(10 * time.Second); code != 76 {
			t.Fatalf("status %d, want 76 (lock lost); stderr %q", code, p.stderr.String())
		}
		waitGone(t, sh, 2*time.Second)
	})
}

// waitWatcher polls until a dlock watcher for process group pgid runs.
func waitWatcher(t *testing.T, pgid int, timeout time.Duration) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("finds the watcher through /proc")
	}
	want := []byte("\x00dlock-watch\x00" + strconv.Itoa(pgid) + "\x00")
	deadline := time.Now().Add(timeout)
	for {
		paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && bytes.HasSuffix(b, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no watcher for process group %d after %v", pgid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

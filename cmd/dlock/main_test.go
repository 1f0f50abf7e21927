package main

// Integration tests: the real dlock binary, run as a process against a
// real redis-server.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dl "github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// dlockBin is the binary under test, built once by TestMain.
var dlockBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	dlockBin = filepath.Join(dir, "dlock")
	build := exec.Command("go", "build", "-o", dlockBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dlock:", err)
		return 1
	}
	return m.Run()
}

// server starts a redis-server for one test and returns its URL and a
// client to look at it.
func server(t *testing.T) (string, *redis.Client) {
	t.Helper()
	srv := redisserver.Start(t)
	return "redis://" + srv.Addr() + "/0", srv.Client(t)
}

// closedURL points at a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "redis://" + addr + "/0"
}

// lockKey is where the Redis driver stores the lock name.
func lockKey(name string) string { return redisdriver.DefaultPrefix + "{" + name + "}" }

// lockHeld asks a dlock Client whether anyone holds the lock (a released
// lock keeps a key for a while, marked released).
func lockHeld(t *testing.T, rdb *redis.Client, name string) bool {
	t.Helper()
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dl.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }() // closes the driver; rdb stays open
	_, held, err := c.Inspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// syncBuffer is a bytes.Buffer safe to read while a process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running dlock process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	code   int
}

// start runs dlock with DLOCK_REDIS set to url. The process is stopped
// and waited for when the test ends, if it has not exited by then.
func start(t *testing.T, url string, args ...string) *proc {
	t.Helper()
	return startEnv(t, url, nil, args...)
}

// startEnv is start with extra NAME=value variables for dlock.
func startEnv(t *testing.T, url string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(dlockBin, args...)
	p.cmd.Env = append(append(dlockFreeEnviron(), "DLOCK_REDIS="+url, "DLOCK_BIN="+dlockBin), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// A session of its own, without a controlling terminal, as under cron
	// or systemd: the tests behave the same when run from a terminal (the
	// terminal's own cases are in tty_test.go).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		// SIGTERM lets dlock stop its command's process group too.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the exit status, failing the test after timeout.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("dlock %v still running after %v; stderr: %s", p.cmd.Args[1:], timeout, p.stderr.String())
		return -1
	}
}

// dlockEnv runs dlock to completion with extra variables.
func dlockEnv(t *testing.T, url string, env []string, args ...string) (int, string, string) {
	t.Helper()
	p := startEnv(t, url, env, args...)
	code := p.wait(30 * time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// dlock runs dlock to completion and returns status, stdout and stderr.
func dlock(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	p := start(t, url, args...)
	code := p.wait(30 * time.Second)
	return code, p.stdout.String(), p.stderr.String()
}

// dlockFreeEnviron is the test's environment without any DLOCK_*
// variable, which would set dlock's flags.
func dlockFreeEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

func environWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// waitFile polls until path exists and is non-empty, returning its
// trimmed content.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %v", filepath.Base(path), timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

// waitGone fails the test unless pid has ended within timeout.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still alive after %v", pid, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pidFile(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(waitFile(t, path, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// oneLine fails unless s is exactly one line (the contract for messages
// of non-zero exits).
func oneLine(t *testing.T, s string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || !strings.HasPrefix(s, "dlock") {
		t.Errorf("stderr is not one dlock line: %q", s)
	}
}

// writeFile creates path, the signal a test gives a waiting command.
func writeFile(path string) error { return os.WriteFile(path, []byte("x\n"), 0o600) }

// dlVersion is the version a plain build reports.
const dlVersion = dl.Version

package main

import (
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startEtcd runs a single-member etcd on free loopback ports for one test
// and returns its client address.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("no etcd binary (apt-get install etcd-server): %v", err)
	}
	// Both listeners open at once, so the two ports differ (a port closed
	// and asked for again can come back); then closed, for etcd.
	var ports [2]int
	var ls [2]net.Listener
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		_ = l.Close()
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cmd := exec.Command(bin, "--name", "t", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "t="+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := hc.Get(client + "/health"); err == nil {
			var b [128]byte
			n, _ := resp.Body.Read(b[:])
			resp.Body.Close()
			if strings.Contains(string(b[:n]), `"health":"true"`) {
				return strings.TrimPrefix(client, "http://")
			}
		}
	}
	t.Fatal("etcd did not become healthy within 20s")
	return ""
}

// dlockCmd runs the binary with env added to the test's environment.
func dlockCmd(env []string, args ...string) (string, int) {
	cmd := exec.Command(dlockBin, args...)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return string(out), code
}

// run, status, list and unlock on etcd, by flag and by $DLOCK_ETCD.
func TestEtcdCommands(t *testing.T) {
	addr := startEtcd(t)
	noRedis := []string{"DLOCK_REDIS="}
	env := checkStoreCommands(t, "etcd", "DLOCK_ETCD", addr)
	// Two stores named at once are refused, not silently chosen between.
	if out, code := dlockCmd(env, "--redis", "redis://127.0.0.1:1/0", "--etcd", addr, "list"); code != 64 {
		t.Errorf("--redis with --etcd: exit %d, %q; want 64", code, out)
	}
	if out, code := dlockCmd([]string{"DLOCK_REDIS=redis://127.0.0.1:1/0", "DLOCK_ETCD=" + addr}, "list"); code != 64 {
		t.Errorf("DLOCK_REDIS with DLOCK_ETCD: exit %d, %q; want 64", code, out)
	}
	if out, code := dlockCmd([]string{"DLOCK_REDIS=redis://127.0.0.1:1/0"}, "--etcd", addr, "list"); code != 0 {
		t.Errorf("--etcd beats $DLOCK_REDIS: exit %d, %q", code, out)
	}
	if out, code := dlockCmd(noRedis, "--etcd", addr, "run", "--ttl", "1s", "short", "--", "true"); code != 64 {
		t.Errorf("--ttl 1s on etcd (below the 2s minimum lease): exit %d, %q; want 64", code, out)
	}
}

// On etcd too, a plain run that waits behind readers is queued: a later
// --shared run waits behind it instead of overtaking it (a stream of
// readers cannot starve it), and status lists it as a waiter. Before, a
// plain run waited outside the queue on etcd, and -n -s got in.
func TestEtcdReadersDoNotOvertakeAWaitingRun(t *testing.T) {
	env := []string{"DLOCK_REDIS=", "DLOCK_ETCD=" + startEtcd(t)}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(dlockBin, args...)
		cmd.Env = append(cmd.Environ(), env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	start("run", "--shared", "--ttl", "3s", "rw", "--", "sleep", "30")
	waitStatus := func(want string) string {
		t.Helper()
		var out string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if out, _ = dlockCmd(env, "status", "rw"); strings.Contains(out, want) {
				return out
			}
		}
		t.Fatalf("status never showed %q: %q", want, out)
		return ""
	}
	waitStatus("shared")
	start("run", "--ttl", "3s", "rw", "--", "true")
	if out := waitStatus("exclusive"); !strings.Contains(out, "1 waiter") {
		t.Errorf("status with a plain run waiting behind a reader: %q, want it listed as the one waiter", out)
	}
	if out, code := dlockCmd(env, "run", "-n", "--shared", "rw", "--", "true"); code != 75 || !strings.Contains(out, "queued") {
		t.Errorf("a reader arriving after the waiting plain run, with -n: exit %d, %q; want 75, refused for the queued writer", code, out)
	}
}

// An endpoint that cannot be parsed is a usage error (64); one that
// refuses connections is an unavailable store (69), at once, named with
// the cause, also with a user, whose authentication happens as the
// client opens (that exited 64, as if the spec were wrong, after 5 s).
func TestEtcdEndpointErrors(t *testing.T) {
	refused := freeAddr(t)
	for _, c := range []struct {
		spec string
		code int
		want string
	}{
		{"127.0.0.1:notaport", 64, "not host:port"},
		{refused, 69, refused + ": connect: connection refused"},
		{"etcd://dl:SECRETPW@" + refused, 69, refused + ": connect: connection refused"},
	} {
		start := time.Now()
		out, code := dlockCmd([]string{"DLOCK_REDIS="}, "status", "--etcd", c.spec, "k")
		took := time.Since(start)
		t.Logf("status --etcd %s: exit %d after %v: %s", c.spec, code, took.Round(time.Millisecond), strings.TrimSpace(out))
		if code != c.code || !strings.Contains(out, c.want) || strings.Contains(out, "SECRETPW") {
			t.Errorf("status --etcd %s: exit %d, %q; want %d and %q, without the password", c.spec, code, out, c.code, c.want)
		}
		// Generous for a loaded machine; the request timeout is 5 s.
		if took > 3*time.Second {
			t.Errorf("status --etcd %s took %v, want far less than the 5 s request timeout", c.spec, took)
		}
	}
}

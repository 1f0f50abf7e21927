package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startZooKeeper runs a standalone ZooKeeper server on a free loopback
// port for one test, from the Debian package's jar (or the class path in
// $DLOCK_ZK_CLASSPATH), and returns its client address.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	return startZooKeeperWith(t, "maxSessionTimeout=60000\n")
}

// startZooKeeperWith is startZooKeeper with the given lines of
// configuration instead of its longer session limit.
func startZooKeeperWith(t *testing.T, extra string) string {
	t.Helper()
	cp := os.Getenv("DLOCK_ZK_CLASSPATH")
	if cp == "" {
		cp = "/usr/share/java/zookeeper.jar"
	}
	if _, err := os.Stat(strings.Split(cp, ":")[0]); err != nil {
		t.Fatalf("no ZooKeeper (apt-get install zookeeper, or set DLOCK_ZK_CLASSPATH): %v", err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("no java: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\nforceSync=no\n%s",
		filepath.Join(dir, "data"), port, extra)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("srvr"))
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "Mode: ") {
					c.Close()
					return addr
				}
			}
			c.Close()
		}
	}
	t.Fatal("ZooKeeper did not serve within 30s")
	return ""
}

// run, status, list and unlock on ZooKeeper, by flag and by $DLOCK_ZK.
func TestZooKeeperCommands(t *testing.T) {
	addr := startZooKeeper(t)
	noRedis := []string{"DLOCK_REDIS="}
	out, code := dlockCmd(noRedis, "--zk", addr, "run", "--ttl", "3s", "job", "--", "sh", "-c", `echo "token=$DLOCK_TOKEN"`)
	if code != 0 || !strings.Contains(out, "token=") {
		t.Fatalf("run on ZooKeeper: exit %d, %q", code, out)
	}
	env := append(noRedis, "DLOCK_ZK="+addr)
	bg := exec.Command(dlockBin, "run", "--ttl", "3s", "held", "--", "sleep", "30")
	bg.Env = append(bg.Environ(), env...)
	if err := bg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bg.Process.Kill(); _ = bg.Wait() })
	var status string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status, code = dlockCmd(env, "status", "held"); code == 0 {
			break
		}
	}
	if code != 0 || !strings.Contains(status, "token:") {
		t.Fatalf("status of a held lock: exit %d, %q", code, status)
	}
	if out, code := dlockCmd(env, "list"); code != 0 || !strings.Contains(out, "held") {
		t.Errorf("list: exit %d, %q", code, out)
	}
	reader := exec.Command(dlockBin, "run", "--shared", "--ttl", "3s", "reports", "--", "sleep", "30")
	reader.Env = append(reader.Environ(), env...)
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reader.Process.Kill(); _ = reader.Wait() })
	var list string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if list, code = dlockCmd(env, "list"); code == 0 && strings.Contains(list, "QUEUED") {
			break
		}
	}
	if !strings.Contains(list, "QUEUED") || !strings.Contains(list, "reports") || !strings.Contains(list, "shared") {
		t.Errorf("list with a reader on ZooKeeper: exit %d, %q; want it under QUEUED", code, list)
	}
	if out, code := dlockCmd(env, "run", "--wait", "0", "held", "--", "true"); code != 75 {
		t.Errorf("run of a held lock with --wait 0: exit %d, %q; want 75", code, out)
	}
	if out, code := dlockCmd(env, "unlock", "--force", "held"); code != 0 {
		t.Errorf("unlock --force: exit %d, %q", code, out)
	}
	done := make(chan error, 1)
	go func() { done <- bg.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 76 {
			t.Errorf("run whose lock was broken: %v, want exit 76", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("run whose lock was broken still running after 10s")
	}
	if out, code := dlockCmd(env, "status", "held"); code != 1 {
		t.Errorf("status after unlock --force: exit %d, %q; want 1", code, out)
	}
	if out, code := dlockCmd(env, "--etcd", "127.0.0.1:1", "--zk", addr, "list"); code != 64 {
		t.Errorf("--etcd with --zk: exit %d, %q; want 64", code, out)
	}
	if out, code := dlockCmd(noRedis, "--zk", "zk://"+addr, "list"); code != 64 {
		t.Errorf("--zk with a scheme: exit %d, %q; want 64", code, out)
	}
	// Open asks for 45 s, which this server grants: MaxTTL 30 s.
	if out, code := dlockCmd(noRedis, "--zk", addr, "run", "--ttl", "31s", "long", "--", "true"); code != 64 {
		t.Errorf("--ttl above two thirds of the session timeout: exit %d, %q; want 64", code, out)
	}
}

// Without --ttl, a run on a server with ZooKeeper's default session limit
// (20 ticks: 10 s here, 40 s with the usual 2 s tick) takes the longest
// TTL the session allows, below dlock's 30 s default, and runs; an
// explicit --ttl above it is a usage error that says why. Before, the
// default 30 s was always asked for, so every run without --ttl exited 64
// on such a server.
func TestZooKeeperRunWithoutTTL(t *testing.T) {
	addr := startZooKeeperWith(t, "")
	env := []string{"DLOCK_REDIS=", "DLOCK_ZK=" + addr}
	out, code := dlockCmd(env, "run", "job", "--", "sh", "-c", `echo "token=$DLOCK_TOKEN"`)
	if code != 0 || !strings.Contains(out, "token=") {
		t.Fatalf("run without --ttl on ZooKeeper: exit %d, %q; want it run", code, out)
	}
	if out, code := dlockCmd(env, "run", "--ttl", "30s", "job", "--", "true"); code != 64 {
		t.Fatalf("run --ttl 30s on a 10 s session: exit %d, %q; want 64", code, out)
	}
}

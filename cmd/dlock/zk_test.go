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
	env := checkStoreCommands(t, "zk", "DLOCK_ZK", addr)
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

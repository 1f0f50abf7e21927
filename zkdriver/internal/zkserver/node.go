package zkserver

import (
	"bufio"
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

	"github.com/dlockio/dlock/internal/testkit/serverproc"
)

// startTimeout bounds how long a node may take to serve clients: a JVM
// starts in seconds, and an ensemble member also waits for a quorum.
const startTimeout = 60 * time.Second

// TickTime is the servers' tick: sessions may last 2 to 360 ticks (0.5 s to 90 s).
const TickTime = 250 * time.Millisecond

// Node is one ZooKeeper server process of a test.
type Node struct {
	t       testing.TB
	in      installation
	id      int
	dir     string // configuration, data and log, kept across restarts
	client  int    // client port
	servers string // server.N lines; empty for a standalone node

	mu     sync.Mutex
	proc   *serverproc.Process
	paused bool
}

// Addr returns the node's client address, host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.client) }

// ID returns the node's id in its ensemble (1 for a standalone node).
func (n *Node) ID() int { return n.id }

// Pid returns the process id of the running server, 0 when stopped.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.Pid()
}

func (n *Node) logPath() string { return filepath.Join(n.dir, "server.log") }

// writeConfig writes zoo.cfg and myid into the node's directory. The
// servers skip fsync (forceSync=no): a kill -9 keeps what the kernel has
// been given, so no test can tell, and tests run several times faster.
func (n *Node) writeConfig() error {
	data := filepath.Join(n.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`tickTime=%d
initLimit=20
syncLimit=4
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
minSessionTimeout=%d
maxSessionTimeout=%d
4lw.commands.whitelist=srvr,ruok
znode.container.checkIntervalMs=1000
forceSync=no
%s`, TickTime.Milliseconds(), data, n.client, 2*TickTime.Milliseconds(), 360*TickTime.Milliseconds(), n.servers)
	if err := os.WriteFile(filepath.Join(n.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(n.id)+"\n"), 0o644)
}

// launch starts the server process (without waiting for it to serve).
func (n *Node) launch() error {
	log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(n.in.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", n.in.classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
		filepath.Join(n.dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = log, log
	p, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("zkserver: starting %s: %w", n.in.java, err)
	}
	n.mu.Lock()
	n.proc, n.paused = p, false
	n.mu.Unlock()
	return nil
}

// Mode asks the node for its role: "standalone", "leader" or "follower";
// an error while it does not serve clients.
func (n *Node) Mode() (string, error) {
	c, err := net.DialTimeout("tcp", n.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", errNotServing
}

// waitServing waits until the node answers srvr with a role.
func (n *Node) waitServing() error {
	deadline := time.Now().Add(startTimeout)
	for {
		n.mu.Lock()
		p := n.proc
		n.mu.Unlock()
		if _, err := n.Mode(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("zkserver: node %d at %s not serving after %v: %v; log:\n%s", n.id, n.Addr(), startTimeout, err, serverproc.LogTail(n.logPath(), 30))
		}
		select {
		case <-p.Done():
			return fmt.Errorf("zkserver: node %d exited: %v; log:\n%s", n.id, p.State(), serverproc.LogTail(n.logPath(), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to the server and waits for it to exit (a crash: its
// data directory stays for Restart).
func (n *Node) Kill() {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart starts a killed node again on its ports and data, and waits
// until it serves clients.
func (n *Node) Restart() {
	n.t.Helper()
	n.Kill()
	if err := n.launch(); err != nil {
		n.t.Fatal(err)
	}
	if err := n.waitServing(); err != nil {
		n.t.Fatal(err)
	}
}

// Pause stops the server with SIGSTOP: its sockets stay open and silent.
func (n *Node) Pause() { n.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server.
func (n *Node) Resume() { n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, paused bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return
	}
	if err := syscall.Kill(n.proc.Pid(), sig); err != nil {
		n.t.Errorf("zkserver: signal %v to node %d: %v", sig, n.id, err)
		return
	}
	n.paused = paused
}

// stop ends the process at the test's end; a paused one is resumed so
// that it can die.
func (n *Node) stop() {
	n.mu.Lock()
	p, paused := n.proc, n.paused
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return
	}
	if paused {
		_ = syscall.Kill(p.Pid(), syscall.SIGCONT)
	}
	p.Kill()
}

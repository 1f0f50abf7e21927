package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/zkdriver"
	"github.com/go-zookeeper/zk"
)

// The ZooKeeper peers: zk, go-zookeeper's own lock recipe (zk.NewLock),
// and dlock-zk, dlock on zkdriver. Both run on a local 3-node ensemble
// that bench starts when one of them is selected, each worker connected
// to all three nodes with a session of its own.

// errNoZK marks the ZooKeeper peers as skipped.
var errNoZK = errors.New("ZooKeeper not available")

// zkBenchTick is the ensemble's tickTime, ZooKeeper's default. Sessions
// may last up to 60 ticks (maxSessionTimeout): a worker's is 1.5 lock
// TTLs, so that dlock-zk's MaxTTL fits the TTL.
const zkBenchTick = 2 * time.Second

func zkPeers() []peer {
	return []peer{
		{name: "zk", waits: "go-zookeeper's lock recipe: ephemeral sequential node, watch on the previous node", newWorker: newZKWorker, zk: true},
		{name: "dlock-zk", waits: "FIFO queue of ephemeral sequential nodes (Lock's default): the waiter's Driver watches the node ahead", newWorker: newDlockZKWorker, newHolder: newDlockZKHolder, zk: true},
	}
}

// zkEnsemble is the three servers of the ZooKeeper peers.
type zkEnsemble struct {
	nodes []*server
}

func (e *zkEnsemble) servers() string {
	addrs := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		addrs[i] = n.addr
	}
	return strings.Join(addrs, ",")
}

func (e *zkEnsemble) stop() {
	for _, n := range e.nodes {
		n.stop()
	}
}

func (e *zkEnsemble) cpuSeconds() (float64, error) {
	var sum float64
	for _, n := range e.nodes {
		s, err := n.cpuSeconds()
		if err != nil {
			return 0, err
		}
		sum += s
	}
	return sum, nil
}

// zkClassPath is where the Debian package zookeeper puts the server, or
// $DLOCK_ZK_CLASSPATH; "" when neither is there.
func zkClassPath() string {
	if cp := os.Getenv("DLOCK_ZK_CLASSPATH"); cp != "" {
		return cp
	}
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err == nil {
		return "/usr/share/java/zookeeper.jar"
	}
	return ""
}

// zkVersion is the Debian package's ZooKeeper version, or "".
func zkVersion() string {
	m, _ := filepath.Glob("/usr/share/java/zookeeper-[0-9]*.jar")
	if len(m) == 0 {
		return ""
	}
	return "ZooKeeper " + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), "zookeeper-"), ".jar")
}

// startZK starts a 3-node ensemble on free loopback ports, each node with
// a temporary data directory and fsync on (ZooKeeper's default), and
// waits until every node serves. It returns nil, nil without ZooKeeper.
func startZK() (*zkEnsemble, error) {
	cp := zkClassPath()
	java, err := exec.LookPath("java")
	if cp == "" || err != nil {
		return nil, nil
	}
	var ports [9]int
	var ls [9]net.Listener
	for i := range ls {
		if ls[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		ports[i] = ls[i].Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		_ = l.Close()
	}
	var members strings.Builder
	for i := range 3 {
		fmt.Fprintf(&members, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
	}
	e := &zkEnsemble{}
	for i := range 3 {
		n, err := startZKNode(java, cp, i+1, ports[3*i], members.String())
		if err != nil {
			e.stop()
			return nil, err
		}
		e.nodes = append(e.nodes, n)
	}
	for _, n := range e.nodes {
		if err := waitZKServing(n); err != nil {
			e.stop()
			return nil, err
		}
	}
	return e, nil
}

func startZKNode(java, cp string, id, port int, members string) (*server, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-zk-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	cfg := fmt.Sprintf("tickTime=%d\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxSessionTimeout=%d\n4lw.commands.whitelist=srvr\n%s",
		zkBenchTick.Milliseconds(), data, port, 60*zkBenchTick.Milliseconds(), members)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "zk.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(java, "-Xmx512m", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	s := &server{name: "zk" + strconv.Itoa(id), addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	stopOnSignal(s)
	return s, nil
}

// waitZKServing waits until n answers srvr with a role (a quorum formed).
func waitZKServing(n *server) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.done:
			return fmt.Errorf("%s exited early: %s", n.name, tail(filepath.Join(n.dir, "zk.log")))
		default:
		}
		if c, err := net.DialTimeout("tcp", n.addr, time.Second); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("srvr"))
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "Mode: ") {
					c.Close()
					return nil
				}
			}
			c.Close()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not serving within 60s", n.name)
}

// countingConn counts the requests a ZooKeeper client writes: go-zookeeper
// writes each request (and each ping) with one Write.
type countingConn struct{ net.Conn }

func (c countingConn) Write(b []byte) (int, error) {
	roundTrips.Add(1)
	return c.Conn.Write(b)
}

// zkSession connects to servers with a session of timeout and waits for
// it to be established.
func zkSession(servers string, timeout time.Duration) (*zk.Conn, error) {
	if servers == "" {
		return nil, errNoZK
	}
	dial := func(network, addr string, t time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, addr, t)
		if err != nil {
			return nil, err
		}
		return countingConn{c}, nil
	}
	conn, events, err := zk.Connect(strings.Split(servers, ","), timeout, zk.WithDialer(dial), zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, err
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() { // go-zookeeper needs its event channel drained
					for range events {
					}
				}()
				return conn, nil
			}
		case <-deadline:
			conn.Close()
			return nil, errors.New("no ZooKeeper session within 10s")
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// zkSessionTimeout is the session of a worker: 1.5 lock TTLs, so that
// dlock-zk's MaxTTL (two thirds of it) is the TTL, and the zk peer's locks
// outlive a dead worker as long.
func zkSessionTimeout(ttl time.Duration) time.Duration {
	return max(ttl*3/2, 2*zkBenchTick)
}

// --- zk: go-zookeeper's recipe ---

type zkWorker struct {
	conn  *zk.Conn
	locks map[string]*zk.Lock
}

func newZKWorker(e env) (worker, error) {
	conn, err := zkSession(e.zkServers, zkSessionTimeout(e.ttl))
	if err != nil {
		return nil, err
	}
	return &zkWorker{conn: conn, locks: make(map[string]*zk.Lock)}, nil
}

// lock takes the recipe's lock. zk.Lock has no context: a Lock abandoned
// when ctx ends releases the lock once it gets it.
func (w *zkWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l := w.locks[key]
	if l == nil {
		l = zk.NewLock(w.conn, "/zk-bench/"+key, zk.WorldACL(zk.PermAll))
		w.locks[key] = l
	}
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return func(context.Context) error { return l.Unlock() }, nil
	case <-ctx.Done():
		go func() {
			if <-done == nil {
				_ = l.Unlock()
			}
		}()
		// A new Lock for the next call: this one is still in use.
		delete(w.locks, key)
		return nil, ctx.Err()
	}
}

func (w *zkWorker) close() { w.conn.Close() }

// --- dlock-zk ---

type dlockZKWorker struct {
	conn *zk.Conn
	c    *dlock.Client // its default TTL is the run's
}

// openZKDlock makes a dlock Client on a session of its own.
func openZKDlock(e env, ttl time.Duration) (*zk.Conn, *dlock.Client, error) {
	timeout := zkSessionTimeout(ttl)
	conn, err := zkSession(e.zkServers, timeout)
	if err != nil {
		return nil, nil, err
	}
	drv, err := zkdriver.New(conn, zkdriver.WithPrefix("/dlock-bench"), zkdriver.WithSessionTimeout(timeout))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	c, err := dlock.New(drv, dlock.WithDefaultTTL(min(ttl, drv.MaxTTL())))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, c, nil
}

func newDlockZKWorker(e env) (worker, error) {
	conn, c, err := openZKDlock(e, e.ttl)
	if err != nil {
		return nil, err
	}
	return &dlockZKWorker{conn: conn, c: c}, nil
}

func (w *dlockZKWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l, err := w.c.Lock(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (w *dlockZKWorker) close() {
	_ = w.c.Close()
	w.conn.Close()
}

type dlockZKHolder struct {
	conn *zk.Conn
	dlockLeases
}

func newDlockZKHolder(e env, ttl time.Duration, n int) (holder, error) {
	conn, c, err := openZKDlock(e, ttl)
	if err != nil {
		return nil, err
	}
	return &dlockZKHolder{conn: conn, dlockLeases: newDlockLeases(c, ttl, n)}, nil
}

func (h *dlockZKHolder) close() {
	_ = h.c.Close() // releases every lease still held
	h.conn.Close()
}

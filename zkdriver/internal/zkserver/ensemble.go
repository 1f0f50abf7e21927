package zkserver

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Start runs one standalone ZooKeeper server for the test and returns it
// serving clients. It fails the test when ZooKeeper is not installed.
func Start(t testing.TB) *Node {
	t.Helper()
	e := start(t, 1)
	return e.Nodes[0]
}

// Ensemble is a ZooKeeper ensemble of a test.
type Ensemble struct {
	Nodes []*Node
}

// StartEnsemble runs an ensemble of n servers (n ≥ 2) for the test and
// returns once every one serves clients (a quorum elected a leader).
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	if n < 2 {
		t.Fatalf("zkserver: an ensemble needs at least 2 servers, not %d", n)
	}
	return start(t, n)
}

func start(t testing.TB, n int) *Ensemble {
	t.Helper()
	in, err := findInstallation()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		t.Fatalf("zkserver: free ports: %v", err)
	}
	var servers strings.Builder
	if n > 1 {
		for i := range n {
			fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
		}
	}
	root := t.TempDir()
	e := &Ensemble{}
	for i := range n {
		nd := &Node{t: t, in: in, id: i + 1, dir: fmt.Sprintf("%s/node%d", root, i+1), client: ports[3*i], servers: servers.String()}
		if err := nd.writeConfig(); err != nil {
			t.Fatalf("zkserver: %v", err)
		}
		e.Nodes = append(e.Nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range e.Nodes {
			nd.stop()
		}
	})
	for _, nd := range e.Nodes {
		if err := nd.launch(); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range e.Nodes {
		if err := nd.waitServing(); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// Servers returns the client addresses, comma-separated, as zkdriver.Open
// takes them.
func (e *Ensemble) Servers() string {
	addrs := make([]string, len(e.Nodes))
	for i, nd := range e.Nodes {
		addrs[i] = nd.Addr()
	}
	return strings.Join(addrs, ",")
}

// Leader returns the node that is the ensemble's leader now, waiting up
// to timeout for one.
func (e *Ensemble) Leader(timeout time.Duration) (*Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, nd := range e.Nodes {
			if nd.Pid() == 0 {
				continue
			}
			if m, err := nd.Mode(); err == nil && m == "leader" {
				return nd, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("zkserver: no leader within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago;
// every listener stays open until all n are picked, so none repeats.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// The shared node: one standalone server for the tests of a package that
// neither stop nor pause it, each under a prefix of its own, so that the
// package starts one JVM for them instead of one each.
var (
	sharedOnce sync.Once
	sharedNode *Node
	sharedDir  string
	sharedErr  error
)

// Shared returns the package's shared standalone node, started on first
// use and stopped by StopShared, which the package's TestMain calls after
// m.Run. A test using it must keep to znodes of its own and must not
// kill, pause or restart it (Kill, Pause and Restart are for nodes of
// Start and StartEnsemble).
func Shared(t testing.TB) *Node {
	t.Helper()
	sharedOnce.Do(func() { sharedNode, sharedDir, sharedErr = startDetached() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedNode
}

// StopShared stops the shared node, if one was started, and removes its
// directory.
func StopShared() {
	if sharedNode != nil {
		sharedNode.stop()
		_ = os.RemoveAll(sharedDir)
	}
}

// startDetached starts a standalone node tied to no test.
func startDetached() (*Node, string, error) {
	in, err := findInstallation()
	if err != nil {
		return nil, "", err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, "", fmt.Errorf("zkserver: free ports: %w", err)
	}
	dir, err := os.MkdirTemp("", "zkserver-shared-")
	if err != nil {
		return nil, "", err
	}
	nd := &Node{in: in, id: 1, dir: dir, client: ports[0]}
	err = nd.writeConfig()
	if err == nil {
		err = nd.launch()
	}
	if err == nil {
		err = nd.waitServing()
	}
	if err != nil {
		nd.stop()
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	return nd, dir, nil
}

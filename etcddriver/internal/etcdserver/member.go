package etcdserver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a member may take to answer /health.
const startTimeout = 20 * time.Second

// Member is one etcd process of a test.
type Member struct {
	t       testing.TB
	bin     string
	name    string
	dir     string // data directory, kept across restarts
	logPath string
	client  int // client port
	peer    int // peer port
	cluster string
	certs   *Certs // serve clients with TLS and client certificates; nil: plain

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed once cmd.Wait returned
	paused bool
}

// Addr returns the member's client address, host:port.
func (m *Member) Addr() string { return "127.0.0.1:" + strconv.Itoa(m.client) }

// Name returns the member's name in the cluster.
func (m *Member) Name() string { return m.name }

// Dir returns the member's data directory.
func (m *Member) Dir() string { return m.dir }

func binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("DLOCK_ETCD_BIN"); b != "" {
		return b
	}
	b, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcdserver: no etcd binary on PATH (apt-get install etcd-server, or set DLOCK_ETCD_BIN): %v", err)
	}
	return b
}

func freePort() (int, error) {
	ps, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// Every listener stays open until all n are picked: a port closed and
// asked for again can come back, and a member given the same port for
// its client and peer URLs cannot start.
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

func (m *Member) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(m.peer) }
func (m *Member) clientURL() string {
	if m.certs != nil {
		return "https://" + m.Addr()
	}
	return "http://" + m.Addr()
}

func (m *Member) args() []string {
	args := []string{
		"--name", m.name,
		"--data-dir", m.dir,
		"--listen-client-urls", m.clientURL(),
		"--advertise-client-urls", m.clientURL(),
		"--listen-peer-urls", m.peerURL(),
		"--initial-advertise-peer-urls", m.peerURL(),
		"--initial-cluster", m.cluster,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", "dlock-test",
		"--log-level", "warn",
	}
	if m.certs != nil {
		args = append(args, "--cert-file", m.certs.ServerCert, "--key-file", m.certs.ServerKey,
			"--trusted-ca-file", m.certs.CA, "--client-cert-auth")
	}
	return args
}

// launch starts the process; it does not wait for it to be ready.
func (m *Member) launch() error {
	logf, err := os.OpenFile(m.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := m.args()
	fmt.Fprintf(logf, "--- etcdserver: %s %s\n", m.bin, strings.Join(args, " "))
	cmd := exec.Command(m.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done, m.paused = cmd, done, false
	m.mu.Unlock()
	return nil
}

// waitHealthy waits until the member answers /health with true (which
// needs a leader), or fails the test.
func (m *Member) waitHealthy() {
	m.t.Helper()
	if err := waitHealthy(m, startTimeout, nil); err != nil {
		m.t.Fatalf("etcdserver: member %s: %v\n%s", m.name, err, m.logTail(30))
	}
}

// errExited is waitHealthy's error for a member that exited.
var errExited = errors.New("exited during start")

// errGaveUp is waitHealthy's error once abort is closed.
var errGaveUp = errors.New("start abandoned: another member exited")

// waitHealthy polls m's /health for up to timeout, or until abort is
// closed (nil: never).
func waitHealthy(m *Member, timeout time.Duration, abort <-chan struct{}) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 500 * time.Millisecond}
	if m.certs != nil {
		cfg, err := m.certs.clientConfig()
		if err != nil {
			return err
		}
		client.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	var last error
	for time.Now().Before(deadline) {
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		select {
		case <-done:
			return errExited
		case <-abort:
			return errGaveUp
		default:
		}
		resp, err := client.Get(m.clientURL() + "/health")
		if err == nil {
			var b [256]byte
			n, _ := resp.Body.Read(b[:])
			resp.Body.Close()
			if strings.Contains(string(b[:n]), `"health":"true"`) {
				return nil
			}
			err = fmt.Errorf("health %q", b[:n])
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not healthy after %v: %v", timeout, last)
}

// Kill sends SIGKILL and waits for the process to exit.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing, like a frozen VM. It returns once the kernel reports the
// process stopped (the signal is asynchronous: a request sent right after
// it could otherwise still be answered).
func (m *Member) Pause() {
	m.signal(syscall.SIGSTOP, true)
	m.mu.Lock()
	pid := m.cmd.Process.Pid
	m.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if processState(pid) == 'T' {
			return
		}
	}
	m.t.Fatalf("etcdserver: member %s not stopped 5s after SIGSTOP", m.name)
}

// processState is the state letter of /proc/PID/stat ('T': stopped), or 0.
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// Resume continues a paused process with SIGCONT.
func (m *Member) Resume() { m.signal(syscall.SIGCONT, false) }

func (m *Member) signal(sig syscall.Signal, paused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		_ = m.cmd.Process.Signal(sig)
		m.paused = paused
	}
}

// Restart kills the member (if running) and starts it again on the same
// ports with its data directory, then waits until it is healthy — which,
// in a cluster, needs a quorum. Use RestartNoWait when it may have none.
func (m *Member) Restart() {
	m.t.Helper()
	m.RestartNoWait()
	m.waitHealthy()
}

// RestartNoWait is Restart without waiting for health.
func (m *Member) RestartNoWait() {
	m.t.Helper()
	m.Kill()
	// The ports were ours a moment ago; a member killed with sockets in
	// use may leave one briefly unavailable: retry.
	var err error
	for range 50 {
		if err = m.launch(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.t.Fatalf("etcdserver: restart member %s: %v", m.name, err)
}

func (m *Member) logTail(n int) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// portTaken reports whether the member's log says one of its ports was
// in use: another process took it between freePorts and etcd's bind.
func (m *Member) portTaken() bool {
	b, err := os.ReadFile(m.logPath)
	return err == nil && strings.Contains(string(b), "address already in use")
}

func (m *Member) cleanup() {
	m.mu.Lock()
	paused := m.paused
	m.mu.Unlock()
	if paused {
		m.Resume()
	}
	m.Kill()
}

// newMembers prepares n members on free ports in fresh data directories.
func newMembers(t testing.TB, n int, pick func(n int) ([]int, error), certs *Certs) []*Member {
	t.Helper()
	bin := binary(t)
	base := t.TempDir()
	ports, err := pick(2 * n)
	if err != nil {
		t.Fatalf("etcdserver: free port: %v", err)
	}
	ms := make([]*Member, n)
	var initial []string
	for i := range ms {
		name := "m" + strconv.Itoa(i)
		ms[i] = &Member{t: t, bin: bin, name: name, dir: filepath.Join(base, name),
			logPath: filepath.Join(base, name+".log"), client: ports[2*i], peer: ports[2*i+1], certs: certs}
		initial = append(initial, name+"="+ms[i].peerURL())
	}
	for _, m := range ms {
		m.cluster = strings.Join(initial, ",")
		t.Cleanup(m.cleanup)
	}
	return ms
}

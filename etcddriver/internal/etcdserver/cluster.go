package etcdserver

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Start runs a single-member etcd and waits until it serves.
func Start(t testing.TB) *Member {
	t.Helper()
	return StartCluster(t, 1).Members[0]
}

// StartTLS runs a single-member etcd that serves clients with TLS only,
// with certs' server certificate, and requires a client certificate
// signed by certs' authority (--client-cert-auth). Its Addr takes
// certs.ClientConfig; Client and Leader, which dial without TLS, do not
// reach it.
func StartTLS(t testing.TB, certs *Certs) *Member {
	t.Helper()
	return startCluster(t, 1, freePorts, certs).Members[0]
}

// Cluster is a set of members started together.
type Cluster struct {
	t       testing.TB
	Members []*Member
}

// startAttempts is how many times StartCluster tries fresh ports when a
// member finds one of its ports taken.
const startAttempts = 5

// StartCluster runs an n-member cluster and waits until every member is
// healthy (a leader is elected).
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return startCluster(t, n, freePorts, nil)
}

// startCluster is StartCluster with the port picker as a parameter, so a
// test can hand it a port that is taken, and the certificates to serve
// with (nil: plain).
func startCluster(t testing.TB, n int, pick func(n int) ([]int, error), certs *Certs) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ms := newMembers(t, n, pick, certs)
		for _, m := range ms {
			if err := m.launch(); err != nil {
				t.Fatalf("etcdserver: start %s: %v", m.name, err)
			}
		}
		// A member that exits leaves the others without a quorum: stop
		// waiting for them then, rather than for the whole timeout.
		var wg sync.WaitGroup
		var once sync.Once
		abort := make(chan struct{})
		errs := make([]error, n)
		for i, m := range ms {
			wg.Go(func() {
				if errs[i] = waitHealthy(m, startTimeout, abort); errors.Is(errs[i], errExited) {
					once.Do(func() { close(abort) })
				}
			})
		}
		wg.Wait()
		failed, taken := -1, false
		for i, err := range errs {
			if err != nil && (failed < 0 || errors.Is(err, errExited)) {
				failed = i
			}
			taken = taken || ms[i].portTaken()
		}
		if failed < 0 {
			return &Cluster{t: t, Members: ms}
		}
		// Ports are free when picked, not when etcd binds them: another
		// test's server may take one in between. Start again elsewhere.
		if taken && attempt < startAttempts {
			for _, m := range ms {
				m.Kill()
			}
			continue
		}
		t.Fatalf("etcdserver: member %s: %v\n%s", ms[failed].name, errs[failed], ms[failed].logTail(30))
	}
}

// Endpoints returns every member's client address.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Addr()
	}
	return eps
}

// Leader returns the index of the current leader, asking each member in
// turn until one that is up answers, for up to timeout.
func (c *Cluster) Leader(timeout time.Duration) (int, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, m := range c.Members {
			cli, err := newClient([]string{m.Addr()})
			if err != nil {
				return -1, false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			st, err := cli.Status(ctx, m.Addr())
			cancel()
			_ = cli.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i, true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1, false
}

// Client returns an etcd client for endpoints, closed when t ends.
func Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := newClient(endpoints)
	if err != nil {
		t.Fatalf("etcdserver: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func newClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
}

// FreeAddr returns a 127.0.0.1 address nothing listens on (at the time).
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// SilentAddr returns a 127.0.0.1 address that accepts connections and
// never answers on them, like a server that hangs: unlike FreeAddr's, a
// client's calls to it end at their deadline, not at once. It closes when
// t ends.
func SilentAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

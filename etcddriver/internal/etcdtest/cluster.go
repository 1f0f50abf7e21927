package etcdtest

import (
	"context"
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

// Cluster is a set of members started together.
type Cluster struct {
	t       testing.TB
	Members []*Member
}

// StartCluster runs an n-member cluster and waits until every member is
// healthy (a leader is elected).
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ms := newMembers(t, n)
	for _, m := range ms {
		if err := m.launch(); err != nil {
			t.Fatalf("etcdtest: start %s: %v", m.name, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, m := range ms {
		wg.Go(func() { errs[i] = waitHealthy(m, startTimeout) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("etcdtest: member %s: %v\n%s", ms[i].name, err, ms[i].logTail(30))
		}
	}
	return &Cluster{t: t, Members: ms}
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
		t.Fatalf("etcdtest: client: %v", err)
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

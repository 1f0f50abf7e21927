package etcdserver

import (
	"context"
	"net"
	"testing"
	"time"
)

// A member can be paused, resumed, killed and restarted with its data.
func TestMemberLifecycle(t *testing.T) {
	m := Start(t)
	cli := Client(t, m.Addr())
	op := func(timeout time.Duration, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return f(ctx)
	}
	if err := op(5*time.Second, func(ctx context.Context) error { _, err := cli.Put(ctx, "k", "v"); return err }); err != nil {
		t.Fatal(err)
	}
	m.Pause()
	if err := op(300*time.Millisecond, func(ctx context.Context) error { _, err := cli.Get(ctx, "k"); return err }); err == nil {
		t.Error("Get from a paused member: no error")
	}
	m.Resume()
	if err := op(5*time.Second, func(ctx context.Context) error { _, err := cli.Get(ctx, "k"); return err }); err != nil {
		t.Errorf("Get after resume: %v", err)
	}
	m.Kill()
	m.Restart()
	var got string
	err := op(10*time.Second, func(ctx context.Context) error {
		resp, err := cli.Get(ctx, "k")
		if err == nil && len(resp.Kvs) == 1 {
			got = string(resp.Kvs[0].Value)
		}
		return err
	})
	if err != nil || got != "v" {
		t.Errorf("after kill -9 and restart: %q, %v; want the value kept", got, err)
	}
}

// A cluster elects one leader, and another after the leader is killed.
func TestClusterLeader(t *testing.T) {
	c := StartCluster(t, 3)
	li, ok := c.Leader(10 * time.Second)
	if !ok {
		t.Fatal("no leader")
	}
	c.Members[li].Kill()
	next, ok := c.Leader(15 * time.Second)
	if !ok || next == li {
		t.Fatalf("after killing leader %d: leader %d, ok %v", li, next, ok)
	}
	c.Members[li].Restart()
}

// freePorts never hands out the same port twice in one call.
func TestFreePortsAreDistinct(t *testing.T) {
	for range 50 {
		ps, err := freePorts(8)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d twice in %v", p, ps)
			}
			seen[p] = true
		}
	}
}

// A member whose port another process took meanwhile does not fail the
// test: the cluster starts again on other ports.
func TestStartClusterRetriesATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	calls := 0
	pick := func(n int) ([]int, error) {
		calls++
		ps, err := freePorts(n)
		if err == nil && calls == 1 {
			ps[len(ps)-1] = taken // the last member's peer port
		}
		return ps, err
	}
	c := startCluster(t, 2, pick, nil)
	if calls != 2 {
		t.Errorf("ports picked %d times, want 2 (one retry)", calls)
	}
	for _, m := range c.Members {
		if m.peer == taken || m.client == taken {
			t.Errorf("member %s runs on the taken port %d", m.name, taken)
		}
	}
	cli := Client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Errorf("Put on the restarted cluster: %v", err)
	}
}

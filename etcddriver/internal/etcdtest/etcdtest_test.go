package etcdtest

import (
	"context"
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

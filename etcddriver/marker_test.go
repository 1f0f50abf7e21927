package etcddriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A release that needs the marker lease while another release is granting
// it, on a store that stopped answering, returns at the end of its own
// ctx. Before, it waited on the mutex the Grant held, for as long as the
// Grant took (the 5 s request timeout), and every release queued behind
// added its own.
func TestReleaseHonoursCtxBehindMarkerGrant(t *testing.T) {
	m := member(t)
	p := redisserver.NewProxy(t, m.Addr())
	d := newDriver(t, etcdserver.Client(t, p.Addr()))
	idA, _ := acquireOK(t, d, "a", 30*time.Second)
	idB, _ := acquireOK(t, d, "b", 30*time.Second)
	p.Blackhole(true)
	first := make(chan struct{})
	go func() {
		defer close(first)
		_, _ = d.Release(context.Background(), []driver.ReleaseRequest{{Key: "a", ID: idA}})
	}()
	for granting := false; !granting; time.Sleep(time.Millisecond) { // no event says the Grant started
		d.markers.mu.Lock()
		granting = d.markers.granting != nil
		d.markers.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "b", ID: idB}})
	if took := time.Since(start); took > 2*time.Second || err == nil {
		t.Errorf("Release with a 300 ms ctx behind a stalled marker Grant: %v after %v; want an error at about 300 ms", err, took.Round(time.Millisecond))
	}
	p.Blackhole(false)
	p.CloseAll()
	<-first
}

// Close revokes the marker lease too, so that neither it nor the release
// markers on it outlive the driver by their 5 to 10 s.
func TestCloseRevokesMarkerLease(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	d, err := New(cli, WithPrefix("markers/"))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := acquireOK(t, d, "k", 30*time.Second)
	if _, err := d.Release(ctxT(t), []driver.ReleaseRequest{{Key: "k", ID: id}}); err != nil {
		t.Fatal(err)
	}
	marks, err := cli.Get(ctxT(t), "markers/", clientv3.WithPrefix())
	if err != nil || marks.Count == 0 {
		t.Fatalf("no release marker after a release (%v): the test checks nothing", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	left, err := cli.Get(ctxT(t), "markers/", clientv3.WithPrefix())
	if err != nil || left.Count != 0 {
		t.Errorf("after Close: %d keys under the prefix (%v), want none", left.Count, err)
	}
	leases, err := cli.Leases(ctxT(t))
	if err != nil || len(leases.Leases) != 0 {
		t.Errorf("after Close: leases %v (%v), want none", leases.Leases, err)
	}
}

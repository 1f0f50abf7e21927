package etcddriver

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// failFastBound is how long a test lets a call that should fail at once
// take: far more than it needs (milliseconds), so that a loaded machine
// passes, and half of DefaultRequestTimeout, which such a call took when
// it waited for a connection. Each test logs what it measured.
const failFastBound = DefaultRequestTimeout / 2

// checkFast fails t unless err, returned after took, is a fast ErrBackend
// that names every endpoint of spec.
func checkFast(t *testing.T, what, spec string, err error, took time.Duration) {
	t.Helper()
	t.Logf("%s: %v after %v", what, err, took.Round(time.Microsecond))
	if !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("%s: %v, want ErrBackend", what, err)
	}
	if took > failFastBound {
		t.Errorf("%s took %v, want at most %v", what, took, failFastBound)
	}
	for ep := range strings.SplitSeq(spec, ",") {
		if !strings.Contains(err.Error(), ep) {
			t.Errorf("%s: %q does not name the endpoint %s", what, err, ep)
		}
	}
}

// checkRefused is checkFast, and err says the connection was refused.
func checkRefused(t *testing.T, what, spec string, err error, took time.Duration) {
	t.Helper()
	checkFast(t, what, spec, err, took)
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("%s: %q does not say the connection was refused", what, err)
	}
}

// A call to endpoints that all refuse connections fails at once, not at
// the request timeout, with an error that names them and the refusal; a
// Close after it does not wait either. Before, TryLock, Inspect and Close
// each took DefaultRequestTimeout (5 s), and the error said only "context
// deadline exceeded". The calls have no deadline of their own.
func TestRefusedEndpointFailsFast(t *testing.T) {
	for _, spec := range []string{
		etcdserver.FreeAddr(t),
		etcdserver.FreeAddr(t) + "," + etcdserver.FreeAddr(t),
	} {
		c, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.TryLock(t.Context(), "k")
		checkRefused(t, "TryLock", spec, err, time.Since(start))
		start = time.Now()
		_, _, err = c.Inspect(t.Context(), "k")
		checkRefused(t, "Inspect", spec, err, time.Since(start))
		start = time.Now()
		err = c.Close()
		took := time.Since(start)
		t.Logf("Close: %v after %v", err, took.Round(time.Microsecond))
		if took > failFastBound {
			t.Errorf("Close after calls to %s took %v, want at most %v", spec, took, failFastBound)
		}
	}
}

// Failing fast is for when no endpoint accepts connections: with one that
// refuses and one that serves, calls go to the one that serves.
func TestOneRefusedEndpointOfTwo(t *testing.T) {
	m := member(t)
	for _, spec := range []string{etcdserver.FreeAddr(t) + "," + m.Addr(), m.Addr() + "," + etcdserver.FreeAddr(t)} {
		c, err := Open(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			lease, err := c.TryLock(ctxT(t), "k")
			if err != nil {
				t.Fatalf("TryLock %d on %s: %v", i, spec, err)
			}
			if err := lease.Unlock(ctxT(t)); err != nil {
				t.Fatalf("Unlock %d on %s: %v", i, spec, err)
			}
		}
		_ = c.Close()
	}
}

// A TryLock, then Close, during an outage (the only member down: its port
// refuses connections) return at once. The lock it could not release stays on
// its lease, and goes with it once etcd is back. Before, Close took twice
// DefaultRequestTimeout: a release, then the lease revocation.
func TestCloseDuringOutage(t *testing.T) {
	m := member(t)
	cfg, err := ParseEndpoints(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	d, err := New(cli)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctxT(t), "left", dlock.WithTTL(faultTTL)); err != nil {
		t.Fatal(err)
	}
	m.Kill()
	// A call racing the crash fails on the broken connection instead:
	// start once the client has seen it break. The error is then the
	// refusal, or, if the client reconnected while the process was dying,
	// the reset that followed.
	conn := cli.ActiveConnection()
	for st := conn.GetState(); st == connectivity.Ready; st = conn.GetState() {
		conn.WaitForStateChange(ctxT(t), st)
	}
	// An acquisition on the lease the driver has sends a keep-alive of
	// it too: that fails at once as well.
	start := time.Now()
	_, err = c.TryLock(t.Context(), "other", dlock.WithTTL(faultTTL))
	checkFast(t, "TryLock during the outage", m.Addr(), err, time.Since(start))
	start = time.Now()
	err = c.Close()
	took := time.Since(start)
	t.Logf("Close during the outage: %v after %v", err, took.Round(time.Microsecond))
	if took > failFastBound {
		t.Errorf("Close during the outage took %v, want at most %v", took, failFastBound)
	}

	m.Restart()
	cli = etcdserver.Client(t, m.Addr()) // cli reconnects at its own pace
	key := DefaultPrefix + lockSpace + "left"
	resp, err := cli.Get(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("after Close and a restart: %v; want the lock Close could not release, on its lease", resp.Kvs)
	}
	// A restarted etcd gives each lease its full TTL again, and looks for
	// expired ones every 500 ms.
	limit := faultTTL + takeoverSlack + 10*time.Second
	wctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	for wr := range cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	t.Errorf("the lock Close left is still there %v after the restart: it should expire with its lease (TTL %v)", limit, faultTTL)
}

// Close gives up revoking the driver's leases after closeTimeout when etcd
// does not answer (a paused member: its connections stay open, silent):
// a process shutting down during an outage does not wait for the store;
// the locks left expire with their lease. Before, it waited for the
// request timeout (DefaultRequestTimeout).
func TestCloseGivesUpOnSilentStore(t *testing.T) {
	m := member(t)
	d, err := New(etcdserver.Client(t, m.Addr()), WithPrefix(t.Name()+"/"))
	if err != nil {
		t.Fatal(err)
	}
	acquireOK(t, d, "k", 30*time.Second)
	m.Pause()
	defer m.Resume()
	start := time.Now()
	err = d.Close()
	took := time.Since(start)
	t.Logf("Close on a silent store: %v after %v", err, took.Round(time.Millisecond))
	if limit := closeTimeout + 2*time.Second; took > limit {
		t.Errorf("Close on a silent store took %v, want about closeTimeout (%v), at most %v", took, closeTimeout, limit)
	}
}

// connectionCause keeps the dial error of gRPC's message, and a message of
// another form whole.
func TestConnectionCause(t *testing.T) {
	for in, want := range map[string]string{
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`: "dial tcp 127.0.0.1:1: connect: connection refused",
		`connection error: desc = "transport: authentication handshake failed: tls: bad certificate"`:                  `connection error: desc = "transport: authentication handshake failed: tls: bad certificate"`,
	} {
		if got := connectionCause(in); got != want {
			t.Errorf("connectionCause(%q) = %q, want %q", in, got, want)
		}
	}
}

// During an outage the client tries to connect again about every
// reconnectDelay, not ever more rarely as gRPC does by default (1 s, then
// 1.6 s, 2.6 s, ... up to two minutes): a call fails at once until it has
// reconnected, so the client is to be back within about that delay of
// etcd.
func TestReconnectsSoon(t *testing.T) {
	m := member(t)
	cfg, err := ParseEndpoints(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dials := make(chan time.Time, 64)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		select {
		case dials <- time.Now():
		default:
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}))
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Get(ctxT(t), "x"); err != nil {
		t.Fatal(err)
	}
	<-dials // the first connection's
	m.Kill()
	if _, err := cli.Get(ctxT(t), "x"); err == nil {
		t.Fatal("Get during the outage: no error")
	}
	// The sixth attempt waits 6.6 s by gRPC's default, 8.4 s at least
	// with its jitter.
	const attempts = 6
	var last, gap time.Duration
	start := time.Now()
	for i := range attempts {
		select {
		case at := <-dials:
			if i > 0 {
				gap = at.Sub(start) - last
			}
			last = at.Sub(start)
		case <-ctxT(t).Done():
			t.Fatalf("%d connection attempts in %v", i, time.Since(start))
		}
	}
	t.Logf("attempt %d came %v after the one before", attempts, gap.Round(time.Millisecond))
	if limit := 2 * reconnectDelay; gap > limit {
		t.Errorf("attempt %d came %v after the one before, want at most %v", attempts, gap, limit)
	}

	m.Restart()
	back := time.Now()
	conn := cli.ActiveConnection()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		conn.WaitForStateChange(ctxT(t), st)
	}
	took := time.Since(back)
	t.Logf("connected %v after etcd was back", took.Round(time.Millisecond))
	if limit := 3 * reconnectDelay; took > limit {
		t.Errorf("connected %v after etcd was back, want at most %v", took, limit)
	}
}

// A Client's Close on a silent store (a paused member: connections open,
// no answers) waits for the store once, not twice: the engine's release of
// the locks held gives up after 0.8 s without an answer, and the
// driver then does not spend another second on revoking its lease with a
// store that has just shown it does not answer. What Close left expires
// with the lease. Before, Close took the engine's second and then the
// driver's.
func TestClientCloseOnSilentStore(t *testing.T) {
	m := member(t)
	d, err := New(etcdserver.Client(t, m.Addr()), WithPrefix(t.Name()+"/"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctxT(t), "k", dlock.WithTTL(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	m.Pause()
	defer m.Resume()
	start := time.Now()
	err = c.Close()
	took := time.Since(start)
	t.Logf("Client.Close on a silent store: %v after %v", err, took.Round(time.Millisecond))
	// Waiting twice takes 2*closeTimeout; once, closeTimeout and the CPU
	// Close needs, which a loaded machine stretches by far less than
	// half a second.
	if limit := closeTimeout + closeTimeout/2; took > limit {
		t.Errorf("Client.Close on a silent store took %v, want at most %v: it waited for the store more than once", took, limit)
	}
}

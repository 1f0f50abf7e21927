package etcddriver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// callFaults injects one-shot faults into an etcd client's calls, by
// method name (the part after the last slash, as rpcCounter counts them).
type callFaults struct {
	mu   sync.Mutex
	fail map[string]callFault
	lose map[string]bool // the next call is sent, and its reply lost
}

// callFault fails the next call of a method, unsent, with err, and then
// arms the loss of the reply of the next call of method then, if any.
type callFault struct {
	err  error
	then string
}

// faultyClient is an etcd client for endpoints whose calls go through
// faults.
func faultyClient(t *testing.T, endpoints ...string) (*clientv3.Client, *callFaults) {
	t.Helper()
	f := &callFaults{fail: map[string]callFault{}, lose: map[string]bool{}}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints,
		Logger:    zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string,
			req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			fail, lose := f.take(method[strings.LastIndex(method, "/")+1:])
			if fail != nil {
				return fail
			}
			err := invoker(ctx, method, req, reply, cc, opts...)
			if lose && err == nil {
				// Unavailable, as a reset connection reports it: the
				// etcd client does not resend a write on it.
				return status.Error(codes.Unavailable, "injected: reply lost")
			}
			return err
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli, f
}

// take returns the fault armed for a call of method, and disarms it.
func (f *callFaults) take(method string) (fail error, lose bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fault, ok := f.fail[method]; ok {
		delete(f.fail, method)
		if fault.then != "" {
			f.lose[fault.then] = true
		}
		return fault.err, false
	}
	lose = f.lose[method]
	delete(f.lose, method)
	return nil, lose
}

// failNext arms a callFault for the next call of method.
func (f *callFaults) failNext(method string, err error, then string) {
	f.mu.Lock()
	f.fail[method] = callFault{err: err, then: then}
	f.mu.Unlock()
}

// A release whose marker lease cannot be granted does not go ahead without
// a marker (etcd refuses every Grant, and lets a Txn that only deletes
// through, while its NOSPACE alarm is raised): if it did, and
// its reply were lost, the retry would find neither the lock nor a marker
// and answer NotHeld for a lock that was ours and that we released. Each
// try below fails or succeeds; none answers NotHeld.
func TestReleaseNeedsItsMarker(t *testing.T) {
	for _, kind := range []struct {
		name    string
		acquire func(t *testing.T, d *Driver) driver.ReleaseRequest
	}{
		{"lock", func(t *testing.T, d *Driver) driver.ReleaseRequest {
			id, _ := acquireOK(t, d, "k", 30*time.Second)
			return driver.ReleaseRequest{Key: "k", ID: id}
		}},
		{"queued", func(t *testing.T, d *Driver) driver.ReleaseRequest {
			id := "r-" + t.Name()
			req := driver.QueueRequest{Key: "k", ID: id, Mode: driver.ModeShared, TTL: 30 * time.Second}
			if res, err := d.Enqueue(ctxT(t), req); err != nil || !res.Granted {
				t.Fatalf("Enqueue: %+v, %v", res, err)
			}
			return driver.ReleaseRequest{Kind: driver.KindRead, Key: "k", ID: id}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			m := member(t)
			cli, faults := faultyClient(t, m.Addr())
			d := newDriver(t, cli)
			req := kind.acquire(t, d)
			// The marker's Grant fails, and the reply of the first Txn
			// after it is lost.
			faults.failNext("LeaseGrant", rpctypes.ErrGRPCNoSpace, "Txn")
			for try := 1; ; try++ {
				res, err := d.Release(ctxT(t), []driver.ReleaseRequest{req})
				if err == nil {
					if res[0] == driver.NotHeld {
						t.Fatalf("release try %d: NotHeld for a lock this driver held and released", try)
					}
					break
				}
				if try == 4 {
					t.Fatalf("release still failing after %d tries: %v", try, err)
				}
			}
			if left, err := cli.Get(ctxT(t), d.lockKey("k")); err != nil || left.Count != 0 {
				t.Errorf("lock key after the release: %d (%v), want none", left.Count, err)
			}
		})
	}
}

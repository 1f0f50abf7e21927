package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func acquireOK(t *testing.T, d *Driver, key string, ttl time.Duration) (string, uint64) {
	t.Helper()
	id := fmt.Sprintf("%032x", time.Now().UnixNano())
	res, err := d.Acquire(ctxT(t), driver.AcquireRequest{Key: key, ID: id, TTL: ttl})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q) = %+v, %v", key, res, err)
	}
	return id, res.Token
}

// acquireOKRetry is acquireOK for a store that may still be recovering.
func acquireOKRetry(t *testing.T, d *Driver, key string) (string, uint64) {
	t.Helper()
	id := fmt.Sprintf("%032x", time.Now().UnixNano())
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := d.Acquire(ctxT(t), driver.AcquireRequest{Key: key, ID: id, TTL: 30 * time.Second})
		if err == nil && res.Acquired {
			return id, res.Token
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire(%q) = %+v, %v", key, res, err)
		}
	}
}

func releaseReq(key, id string) []driver.ReleaseRequest {
	return []driver.ReleaseRequest{{Key: key, ID: id}}
}

// Locks of one TTL share one etcd lease: one grant for all, an acquisition
// is one Txn plus a keep-alive sent with it, and a renewal of a full batch
// is one read and one keep-alive.
func TestSharedLease(t *testing.T) {
	m := member(t)
	cli, rc := countingClient(t, m.Addr())
	d := newDriver(t, cli)
	const n = 2 * MaxBatch
	ttl := 30 * time.Second
	var reqs []driver.RenewRequest
	rc.take()
	for i := range n {
		key := fmt.Sprintf("l%d", i)
		id, _ := acquireOK(t, d, key, ttl)
		reqs = append(reqs, driver.RenewRequest{Key: key, ID: id, TTL: ttl})
	}
	got := rc.take()
	t.Logf("%d acquisitions on one TTL: %v", n, got)
	if got["LeaseGrant"] != 1 || got["Txn"] != n || got["LeaseKeepAlive"] > n {
		t.Errorf("%d acquisitions: %v; want 1 LeaseGrant, %d Txn, at most %d LeaseKeepAlive", n, got, n, n)
	}
	for len(reqs) > 0 {
		held, err := d.Renew(ctxT(t), reqs[:MaxBatch])
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range held {
			if !h {
				t.Errorf("renewal of %q: not held", reqs[i].Key)
			}
		}
		reqs = reqs[MaxBatch:]
		if got := rc.take(); got["Txn"] != 1 || got["LeaseKeepAlive"] != 1 || len(got) != 2 {
			t.Errorf("renewal of %d locks on one lease: %v; want 1 Txn, 1 LeaseKeepAlive", MaxBatch, got)
		}
	}
	// Another TTL is another lease.
	acquireOK(t, d, "other-ttl", 10*time.Second)
	if got := rc.take(); got["LeaseGrant"] != 1 {
		t.Errorf("acquisition with a new TTL: %v; want 1 LeaseGrant", got)
	}
}

// Two acquisitions through one dlock Client exclude each other (etcd's
// concurrency.Mutex does not, on one Session).
func TestOneClientExcludes(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	l, err := c.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "job"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock on the same Client: %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := c.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token %d after %d", l2.Token(), l.Token())
	}
	_ = l2.Unlock(ctx)
}

// A lock deleted behind its holder's back (an operator's etcdctl del, or a
// revoked lease) ends the lease at the next renewal, and Done closes.
func TestLostLockSignal(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	for _, how := range []string{"key deleted", "lease revoked"} {
		t.Run(how, func(t *testing.T) {
			d := newDriver(t, cli)
			c, err := dlock.New(d)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := ctxT(t)
			l, err := c.Lock(ctx, "job", dlock.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cli.Get(ctx, d.lockKey("job"))
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("lock key: %v, %v", resp, err)
			}
			if how == "key deleted" {
				_, err = cli.Delete(ctx, d.lockKey("job"))
			} else {
				_, err = cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Done():
			case <-time.After(3 * time.Second):
				t.Fatal("lease still not ended 3s (one TTL) after its lock was deleted")
			}
			if !errors.Is(l.Err(), dlock.ErrLockLost) {
				t.Errorf("Err = %v, want ErrLockLost", l.Err())
			}
			// The next acquisition works, on a new lease if the old one is gone.
			l2, err := c.Lock(ctx, "job", dlock.WithTTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			_ = l2.Unlock(ctx)
		})
	}
}

// A held lock survives a kill -9 and restart of its (single) member: its
// renewal still says held, its token is unchanged, and the next token is
// greater.
func TestHeldAcrossRestart(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	ttl := 30 * time.Second
	id, tok := acquireOK(t, d, "held", ttl)
	m.Kill()
	m.Restart()
	var held []bool
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if held, err = d.Renew(ctxT(t), []driver.RenewRequest{{Key: "held", ID: id, TTL: ttl}}); err == nil {
			break
		}
	}
	if err != nil || !held[0] {
		t.Fatalf("renewal after restart: %v, %v; want held", held, err)
	}
	info, ok, err := d.Inspect(ctxT(t), "held")
	if err != nil || !ok || info.Token != tok {
		t.Errorf("Inspect after restart: %+v, %v, %v; want token %d", info, ok, err, tok)
	}
	res, err := d.Release(ctxT(t), []driver.ReleaseRequest{{Key: "held", ID: id}})
	if err != nil || res[0] != driver.Released {
		t.Fatalf("release after restart: %v, %v", res, err)
	}
	if _, next := acquireOK(t, d, "held", ttl); next <= tok {
		t.Errorf("token after restart %d, want greater than %d", next, tok)
	}
}

// Close revokes the driver's leases: a lock left behind (its release
// lost) is freed at once, not after its TTL.
func TestCloseRevokes(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	d, err := New(cli, WithPrefix("close/"))
	if err != nil {
		t.Fatal(err)
	}
	acquireOK(t, d, "left", 30*time.Second)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctxT(t), d.lockKey("left"))
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("lock key after Close: %v, %v; want gone", resp.Kvs, err)
	}
	if _, err := d.Acquire(ctxT(t), driver.AcquireRequest{Key: "x", ID: "abc", TTL: time.Minute}); err == nil {
		t.Error("Acquire after Close: no error")
	}
}

// Bad input is refused with errors matching driver.ErrInvalid, before any
// request.
func TestBadInput(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("New(nil) = %v", err)
	}
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	for _, o := range []Option{nil, WithPrefix(""), WithRequestTimeout(0)} {
		if _, err := New(cli, o); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("New with a bad option: %v", err)
		}
	}
	d := newDriver(t, cli)
	ctx := ctxT(t)
	for _, req := range []driver.AcquireRequest{
		{Key: "k", ID: "", TTL: time.Second},
		{Key: "k", ID: "has space", TTL: time.Second},
		{Key: "k", ID: "abc", TTL: 1500 * time.Millisecond},
		{Key: "k", ID: "abc", TTL: 0},
	} {
		if _, err := d.Acquire(ctx, req); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Acquire(%+v) = %v, want ErrInvalid", req, err)
		}
	}
	if _, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "k", ID: "a\x00"}}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Release with a bad id: %v", err)
	}
	if _, err := d.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "a", TTL: time.Millisecond}}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Renew with a bad TTL: %v", err)
	}
}

// dlock rounds TTLs up to etcd's whole seconds and refuses those below the
// minimum lease.
func TestClientTTL(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	c, err := dlock.New(d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t)
	if _, err := c.Lock(ctx, "short", dlock.WithTTL(time.Second)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("Lock with TTL 1s (below etcd's 2s minimum lease): %v, want ErrInvalidTTL", err)
	}
	l, err := c.Lock(ctx, "rounded", dlock.WithTTL(2500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if l.TTL() != 3*time.Second {
		t.Errorf("TTL 2.5s became %v, want 3s", l.TTL())
	}
}

// A cluster that accepts connections and never answers fails a call at
// the caller's deadline, with an error matching ErrBackend or the ctx
// error, not a hang. (One that refuses connections fails it at once:
// TestRefusedEndpointFailsFast.)
func TestUnreachable(t *testing.T) {
	port := etcdserver.SilentAddr(t)
	c, err := Open(port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.TryLock(ctx, "x")
	if err == nil {
		t.Fatal("TryLock on an unreachable cluster: no error")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("TryLock on an unreachable cluster took %v with a 500ms deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("TryLock on an unreachable cluster: %v", err)
	}
}

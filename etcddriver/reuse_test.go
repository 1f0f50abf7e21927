package etcddriver

import (
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// poolLastOK returns when the last keep-alive (or the grant) of d's pool
// lease for ttl seconds that succeeded was sent.
func poolLastOK(t *testing.T, d *Driver, ttl int64) (*poolLease, time.Time) {
	t.Helper()
	d.leases.mu.Lock()
	l := d.leases.byTTL[ttl]
	d.leases.mu.Unlock()
	if l == nil {
		t.Fatalf("no pool lease of %ds", ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l, l.lastOK
}

// An acquisition sends a keep-alive of its lease only when none sent in
// the keepAliveReuse before it started succeeded; acquisitions that need
// one at the same time share it.
func TestKeepAliveReuse(t *testing.T) {
	m := member(t)
	cli, rc := countingClient(t, m.Addr())
	c, d := rootClient(t, cli)
	ctx := ctxT(t)
	ttl := dlock.WithTTL(10 * time.Second)
	for _, opts := range [][]dlock.LockOption{{ttl, dlock.WithFIFO()}, {ttl, dlock.WithoutFIFO()}} {
		l, err := c.Lock(ctx, "warm", opts...)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
		pool, lastOK := poolLastOK(t, d, 10)
		rc.take()
		start := time.Now()
		if l, err = c.Lock(ctx, "k", opts...); err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
		if n := rc.take()["LeaseKeepAlive"]; n != 0 && start.Sub(lastOK) < keepAliveReuse {
			t.Errorf("%d options: %d keep-alives sent by an acquisition %v after the last one", len(opts), n, start.Sub(lastOK))
		}
		// As if the last keep-alive were older: the next acquisitions,
		// eight at once, send one between them.
		pool.mu.Lock()
		pool.lastOK = time.Now().Add(-2 * keepAliveReuse)
		pool.mu.Unlock()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				l, err := c.Lock(ctx, "k"+string(rune('a'+i)), opts...)
				if err != nil {
					t.Error(err)
					return
				}
				_ = l.Unlock(ctx)
			})
		}
		wg.Wait()
		if n := rc.take()["LeaseKeepAlive"]; n != 1 {
			t.Errorf("%d options: 8 acquisitions on a lease last kept alive 2×keepAliveReuse ago sent %d keep-alives, want 1", len(opts), n)
		}
	}
}

// An acquisition that relies on an earlier keep-alive is told a validity
// deadline within what that keep-alive gave its lease, and, never renewed,
// its lock is not deleted by etcd before that deadline: the deletion is
// seen no earlier (a late sight only errs on the side of passing).
func TestReusedKeepAliveCoversTheDeadline(t *testing.T) {
	m := member(t)
	cli, rc := countingClient(t, m.Addr())
	c, d := rootClient(t, cli)
	ctx := ctxT(t)
	for _, plain := range []bool{false, true} {
		opts := []dlock.LockOption{dlock.WithTTL(2 * time.Second), dlock.WithoutWatchdog(), dlock.WithFIFO()}
		if plain {
			opts[2] = dlock.WithoutFIFO()
		}
		name := "fair"
		if plain {
			name = "plain"
		}
		l, err := c.Lock(ctx, "warm-"+name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
		_, lastOK := poolLastOK(t, d, 2)
		// The clock is what is under test: the acquisition comes as late
		// as the last keep-alive still serves it.
		time.Sleep(time.Until(lastOK.Add(keepAliveReuse - 100*time.Millisecond)))
		rc.take()
		start := time.Now()
		if l, err = c.Lock(ctx, name, opts...); err != nil {
			t.Fatal(err)
		}
		if n := rc.take()["LeaseKeepAlive"]; n != 0 {
			if start.Sub(lastOK) < keepAliveReuse {
				t.Errorf("%s: a keep-alive sent %v after the last one", name, start.Sub(lastOK))
			}
			continue // too late on a busy machine: nothing reused to check
		}
		if end := lastOK.Add(2 * time.Second); l.Deadline().After(end) {
			t.Errorf("%s: validity deadline %v after the lease's expiry by the reused keep-alive", name, l.Deadline().Sub(end))
		}
		for resp := range cli.Watch(ctx, d.lockKey(name), clientv3.WithRev(int64(l.Token())+1)) {
			if err := resp.Err(); err != nil {
				t.Fatal(err)
			}
			if len(resp.Events) > 0 {
				if early := time.Until(l.Deadline()); early > 0 {
					t.Errorf("%s: lock key deleted %v before its validity deadline", name, early)
				}
				break
			}
		}
	}
}

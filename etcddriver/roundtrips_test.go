package etcddriver

import (
	"testing"
	"time"

	"github.com/dlockio/dlock"
)

// An uncontended cycle (take, release) is two Txns for every primitive:
// Lock, the fair and the plain lock, TryLock, a reader and a permit. Besides them a Client sends at most one keep-alive of its lease
// per keepAliveReuse and one marker lease grant per markerTTL/2 (counted
// against the cycles' time), and nothing else.
func TestRoundTripsPerCycle(t *testing.T) {
	m := member(t)
	cli, rc := countingClient(t, m.Addr())
	c, _ := rootClient(t, cli)
	ctx := ctxT(t)
	rw, sem := c.RWMutex("rw"), c.Semaphore("sem", 3)
	for _, p := range []struct {
		name string
		take func() (*dlock.Lease, error)
	}{
		{"Lock", func() (*dlock.Lease, error) { return c.Lock(ctx, "default") }},
		{"Lock WithFIFO", func() (*dlock.Lease, error) { return c.Lock(ctx, "fair", dlock.WithFIFO()) }},
		{"Lock WithoutFIFO", func() (*dlock.Lease, error) { return c.Lock(ctx, "plain", dlock.WithoutFIFO()) }},
		{"TryLock", func() (*dlock.Lease, error) { return c.TryLock(ctx, "try") }},
		{"RLock", func() (*dlock.Lease, error) { return rw.RLock(ctx) }},
		{"Semaphore.Acquire", func() (*dlock.Lease, error) { return sem.Acquire(ctx) }},
	} {
		cycle := func() {
			l, err := p.take()
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("%s: Unlock: %v", p.name, err)
			}
		}
		cycle() // the lease grants of the first acquisition
		rc.take()
		const n = 50
		start := time.Now()
		for range n {
			cycle()
		}
		took := time.Since(start)
		got := rc.take()
		kaMax := 1 + int(took/keepAliveReuse)
		grantMax := 1 + int(took/(markerTTL*time.Second/2))
		others := len(got)
		for _, m := range []string{"Txn", "LeaseKeepAlive", "LeaseGrant"} {
			if _, ok := got[m]; ok {
				others--
			}
		}
		if got["Txn"] != 2*n || got["LeaseKeepAlive"] > kaMax || got["LeaseGrant"] > grantMax || others > 0 {
			t.Errorf("%s: %d cycles in %v sent %v; want %d Txn, at most %d LeaseKeepAlive and %d LeaseGrant, nothing else",
				p.name, n, took.Round(time.Millisecond), got, 2*n, kaMax, grantMax)
		}
	}
}

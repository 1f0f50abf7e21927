package etcddriver

import (
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// wakeBound is how soon after the event a woken waiter must hold the
// lock: a few round trips on a loaded machine, far below the fallbacks
// (the holder's TTL, a place's renewal at TTL/3) the cases below had.
const wakeBound = 2 * time.Second

// A plain Lock refused while readers or permit holders had the name is
// woken when the last of them leaves, as by a release. Before, the
// release watch followed only the exclusive holder's key, and the waiter
// slept until its fallback, the holder's TTL: 19.5 s with a 20 s TTL.
func TestPlainLockWokenByTheLastReaderOrPermit(t *testing.T) {
	m := member(t)
	holders, _ := rootClient(t, etcdserver.Client(t, m.Addr()))
	waiterCli, rpcs := countingClient(t, m.Addr())
	waiter, _ := rootClient(t, waiterCli)
	const ttl = 20 * time.Second
	for _, c := range []struct {
		name string
		take func(name string) (*dlock.Lease, error)
	}{
		{"reader", func(name string) (*dlock.Lease, error) {
			return holders.RWMutex(name).RLock(ctxT(t), dlock.WithTTL(ttl))
		}},
		{"permit", func(name string) (*dlock.Lease, error) {
			return holders.Semaphore(name, 2).Acquire(ctxT(t), dlock.WithTTL(ttl))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "wake-" + c.name
			h, err := c.take(name)
			if err != nil {
				t.Fatal(err)
			}
			before := rpcs.count("Txn")
			got := make(chan granted, 1)
			go func() {
				l, err := waiter.Lock(ctxT(t), name, dlock.WithTTL(ttl))
				got <- granted{0, l, err}
			}()
			// The waiter's second refused attempt answered: it follows the
			// release watch's confirmation (the engine attempts, subscribes,
			// attempts again), so the waiter now sleeps until it is woken or
			// its fallback fires.
			for deadline := time.Now().Add(10 * time.Second); rpcs.count("Txn") < before+2; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not make two attempts within 10s")
				}
			}
			select {
			case g := <-got:
				t.Fatalf("plain Lock returned while a %s holds the name: %v", c.name, g.err)
			default:
			}
			if err := h.Unlock(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			released := time.Now()
			var g granted
			select {
			case g = <-got:
			case <-time.After(ttl):
				t.Fatal("plain Lock not granted within the holder's TTL")
			}
			if g.err != nil {
				t.Fatal(g.err)
			}
			if late := time.Since(released); late > wakeBound {
				t.Errorf("plain Lock granted %v after the last %s left, want within %v", late.Round(time.Millisecond), c.name, wakeBound)
			}
			_ = g.lease.Unlock(ctxT(t))
		})
	}
}

// ForceRelease of a name with queued waiters grants the head at once, as
// a release does. Before, it only deleted the lock key, and the head got
// the lock at its place's next renewal: TTL/3 later.
func TestForceReleaseGrantsTheQueue(t *testing.T) {
	m := member(t)
	cli := etcdserver.Client(t, m.Addr())
	holder, d := rootClient(t, cli)
	waiter, _ := rootClient(t, cli)
	operator, _ := rootClient(t, cli)
	const name, ttl = "forced", 30 * time.Second
	h, err := holder.Lock(ctxT(t), name, dlock.WithFIFO(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan granted, 1)
	go func() {
		l, err := waiter.Lock(ctxT(t), name, dlock.WithFIFO(), dlock.WithTTL(ttl))
		got <- granted{0, l, err}
	}()
	waitQueue(t, d, name, 1)
	tok, ok, err := operator.ForceRelease(ctxT(t), name)
	if err != nil || !ok || tok != h.Token() {
		t.Fatalf("ForceRelease: token %d, ok %v, err %v; want the holder's token %d", tok, ok, err, h.Token())
	}
	forced := time.Now()
	var g granted
	select {
	case g = <-got:
	case <-time.After(ttl / 2):
		t.Fatal("the queued waiter was not granted within half a TTL of ForceRelease")
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	if late := time.Since(forced); late > wakeBound {
		t.Errorf("the queued waiter got the lock %v after ForceRelease, want within %v", late.Round(time.Millisecond), wakeBound)
	}
	if g.lease.Token() <= tok {
		t.Errorf("the waiter's token %d is not above the broken holder's %d", g.lease.Token(), tok)
	}
	_ = g.lease.Unlock(ctxT(t))
}

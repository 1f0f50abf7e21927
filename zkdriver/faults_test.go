package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// faultSession is the session timeout of the fault tests' clients: short,
// so that the servers expire a silent client within the test.
const faultSession = 3 * time.Second

// faultClient is a dlock Client on its own session to servers, with the
// longest TTL the session allows.
func faultClient(t *testing.T, servers, prefix string) (*dlock.Client, *Driver) {
	t.Helper()
	conn, granted := dial(t, servers, faultSession)
	d, err := New(conn, WithPrefix(prefix), WithSessionTimeout(granted))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(d, dlock.WithDefaultTTL(d.MaxTTL()), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, d
}

// nodeOfLease returns the path of the one node under a name's node.
func nodeOfLease(t *testing.T, conn *zk.Conn, d *Driver, key string) string {
	t.Helper()
	names, _, err := conn.Children(d.nameNode(key))
	if err != nil || len(names) != 1 {
		t.Fatalf("children of %q: %v, %v; want one node", key, names, err)
	}
	return d.nameNode(key) + "/" + names[0]
}

// TestLostSignalBeforeSessionExpiry: a holder cut off from the servers
// learns its lease is lost before the servers expire its session and
// delete its node, and so before anyone else can take the lock.
func TestLostSignalBeforeSessionExpiry(t *testing.T) {
	n := zkserver.Shared(t)
	proxy := redisserver.NewProxy(t, n.Addr())
	holder, hd := faultClient(t, proxy.Addr(), "/lost")
	other, _ := faultClient(t, n.Addr(), "/lost")
	watcher, _ := dial(t, n.Addr(), testSession)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := holder.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, deleted, err := watcher.ExistsW(nodeOfLease(t, watcher, hd, "k"))
	if err != nil || !ok {
		t.Fatalf("watch of the holder's node: %v, %v", ok, err)
	}
	cut := time.Now()
	proxy.Blackhole(true)

	var lost, gone time.Time
	done := lease.Done()
	for lost.IsZero() || gone.IsZero() {
		select {
		case <-done:
			lost, done = time.Now(), nil
		case ev := <-deleted:
			if ev.Type != zk.EventNodeDeleted {
				t.Fatalf("watch of the holder's node: %+v", ev)
			}
			gone, deleted = time.Now(), nil
		case <-ctx.Done():
			t.Fatalf("lost %v, node deleted %v", !lost.IsZero(), !gone.IsZero())
		}
	}
	if !lost.Before(gone) {
		t.Fatalf("the lease ended %v after the cut, the session's node was deleted %v after it: the signal must come first", lost.Sub(cut), gone.Sub(cut))
	}
	t.Logf("lost signal %v after the cut, node deleted %v after it (session %v, TTL %v)", lost.Sub(cut).Round(time.Millisecond), gone.Sub(cut).Round(time.Millisecond), hd.sessionTimeout, hd.MaxTTL())
	if !errors.Is(lease.Err(), dlock.ErrLockLost) {
		t.Errorf("lost lease's Err = %v, want ErrLockLost", lease.Err())
	}
	next, err := other.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.Token() <= lease.Token() {
		t.Errorf("token after the takeover %d, lost holder's %d: want greater", next.Token(), lease.Token())
	}
}

// TestLostCreateReply: an acquisition whose create was applied but whose
// reply was lost with the connection finds its node again instead of
// leaving it behind and making a second one.
func TestLostCreateReply(t *testing.T) {
	n := zkserver.Shared(t)
	proxy := redisserver.NewProxy(t, n.Addr())
	conn, granted := dial(t, proxy.Addr(), testSession)
	d, err := New(conn, WithPrefix("/lostreply"), WithSessionTimeout(granted))
	if err != nil {
		t.Fatal(err)
	}
	look, _ := dial(t, n.Addr(), testSession)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The name's node first, so that the create below is the one request
	// held up.
	warm := acquireReq("k", newTestID(), d.MaxTTL())
	if res, err := d.Acquire(ctx, warm); err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	releaseAll(t, d, warm)

	proxy.SetLatency(time.Hour) // replies are held back; requests go through
	req := acquireReq("k", newTestID(), d.MaxTTL())
	type result struct {
		acquired bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		res, err := d.Acquire(ctx, req)
		done <- result{res.Acquired, err}
	}()
	for { // until the server has applied the create
		names, _, err := look.Children(d.nameNode("k"))
		if err == nil && len(names) == 1 && strings.Contains(names[0], req.ID) {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the create never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	proxy.SetLatency(0)
	proxy.CloseAll() // the create's reply is lost with the connection
	r := <-done
	if r.err != nil || !r.acquired {
		t.Fatalf("Acquire after its create's reply was lost: acquired %v, %v", r.acquired, r.err)
	}
	names, _, err := look.Children(d.nameNode("k"))
	if err != nil || len(names) != 1 || !strings.Contains(names[0], req.ID) {
		t.Fatalf("nodes of the name after the retry: %v, %v; want the one node of %s", names, err, req.ID)
	}
	releaseAll(t, d, req)
	if names, _, _ := look.Children(d.nameNode("k")); len(names) != 0 {
		t.Fatalf("nodes left after the release: %v", names)
	}
}

// TestCloseDuringOutage: Close of a Client holding leases returns while
// its servers are unreachable, within the session timeout.
func TestCloseDuringOutage(t *testing.T) {
	n := zkserver.Shared(t)
	proxy := redisserver.NewProxy(t, n.Addr())
	c, _ := faultClient(t, proxy.Addr(), "/outage")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Lock(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	proxy.Blackhole(true)
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
		t.Logf("Close returned %v after the outage began", time.Since(start).Round(time.Millisecond))
	case <-time.After(faultSession):
		t.Fatalf("Close still running %v into the outage", faultSession)
	}
}

// TestWaiterSessionExpires: a waiter cut off from the servers while it
// waits loses its place (when its place's TTL runs out, before its session
// expires, the waiter behind it deletes it); the live waiters behind it
// are granted in their order, and it is never granted.
func TestWaiterSessionExpires(t *testing.T) {
	n := zkserver.Shared(t)
	proxy := redisserver.NewProxy(t, n.Addr())
	holder, hd := faultClient(t, n.Addr(), "/waiterexp")
	cut, _ := faultClient(t, proxy.Addr(), "/waiterexp")
	look, _ := dial(t, n.Addr(), testSession)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hl, err := holder.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	nodes := func() []string {
		names, _, err := look.Children(hd.nameNode("k"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	waitNodes := func(want int) {
		for len(nodes()) != want {
			if ctx.Err() != nil {
				t.Fatalf("the name has %d nodes, want %d", len(nodes()), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	grants := make(chan waitGrant, 3)
	wait := func(who string, c *dlock.Client, lctx context.Context) {
		go func() {
			l, err := c.Lock(lctx, "k")
			g := waitGrant{who: who, err: err}
			if err == nil {
				g.token = l.Token()
				if who != "cut" {
					defer func() { _ = l.Unlock(context.Background()) }()
				}
			}
			grants <- g
		}()
	}
	cutCtx, cutCancel := context.WithTimeout(ctx, 4*faultSession)
	defer cutCancel()
	wait("cut", cut, cutCtx)
	waitNodes(2)
	live := make([]*dlock.Client, 2)
	for i := range live {
		live[i], _ = faultClient(t, n.Addr(), "/waiterexp")
		wait(fmt.Sprintf("live%d", i+1), live[i], ctx)
		waitNodes(3 + i)
	}
	cutNode := sortedChildren(nodes())[1].name
	proxy.Blackhole(true)
	for slices.ContainsFunc(nodes(), func(s string) bool { return s == cutNode }) {
		if ctx.Err() != nil {
			t.Fatal("the cut waiter's node outlived its session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := hl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if order := liveGrants(t, grants, hl.Token()); order[0] != "live1" || order[1] != "live2" {
		t.Errorf("grants in order %v, want live1 then live2", order)
	}
}

// waitGrant is what a waiting Lock of TestWaiterSessionExpires ended with.
type waitGrant struct {
	who   string
	token uint64
	err   error
}

// liveGrants collects the grants of the two live waiters, in order, each
// with a token above the one before (from prev); the cut waiter must not
// be among them.
func liveGrants(t *testing.T, grants <-chan waitGrant, prev uint64) []string {
	t.Helper()
	var order []string
	for len(order) < 2 {
		g := <-grants
		if g.who == "cut" {
			if g.err == nil {
				t.Fatalf("the cut waiter was granted (token %d)", g.token)
			}
			continue
		}
		if g.err != nil {
			t.Fatalf("%s: %v", g.who, g.err)
		}
		if g.token <= prev {
			t.Errorf("%s's token %d not above the previous holder's %d", g.who, g.token, prev)
		}
		prev = g.token
		order = append(order, g.who)
	}
	return order
}

// TestLostDeleteReply: a release whose delete was applied but whose reply
// was lost with the connection is answered AlreadyReleased when retried
// (a retried Unlock returns nil), not NotHeld as a lost lease would be.
func TestLostDeleteReply(t *testing.T) {
	n := zkserver.Shared(t)
	proxy := redisserver.NewProxy(t, n.Addr())
	conn, granted := dial(t, proxy.Addr(), testSession)
	d, err := New(conn, WithPrefix("/lostdelete"), WithSessionTimeout(granted))
	if err != nil {
		t.Fatal(err)
	}
	look, _ := dial(t, n.Addr(), testSession)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := acquireReq("k", newTestID(), d.MaxTTL())
	if res, err := d.Acquire(ctx, req); err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	rel := []driver.ReleaseRequest{{Key: "k", ID: req.ID}}
	proxy.SetLatency(time.Hour) // replies are held back; requests go through
	done := make(chan error, 1)
	go func() {
		_, err := d.Release(ctx, rel)
		done <- err
	}()
	for { // until the server has applied the delete
		names, _, err := look.Children(d.nameNode("k"))
		if err == nil && len(names) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the delete never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	proxy.SetLatency(0)
	proxy.CloseAll() // the delete's reply is lost with the connection
	if err := <-done; err == nil {
		t.Fatal("the release whose reply was lost answered no error")
	}
	res, err := d.Release(ctx, rel)
	if err != nil || len(res) != 1 || res[0] != driver.AlreadyReleased {
		t.Fatalf("the release retried: %v, %v; want AlreadyReleased", res, err)
	}
}

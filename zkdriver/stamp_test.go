package zkdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// A create is a multi request with a write of the prefix's stamp node, and
// the token is read off the stamp's new stat instead of the node's. It
// must be the node's creation zxid: what Inspect shows and what a plain
// create followed by a stat would give. Where the stamp node refuses the
// write (made by another client with an ACL this one does not pass), the
// driver falls back to plain creates, with the same tokens. The stamp
// node is no lock name.
func TestTokenIsTheNodesCreationZxid(t *testing.T) {
	n := zkserver.Shared(t)
	for _, tc := range []struct {
		name           string
		lockedOut      bool // the stamp node was made with an ACL the driver does not pass
		readOnlyParent bool // the prefix exists under a parent the driver may not create in
	}{{"stamp", false, false}, {"stamp refused", true, false}, {"prefix under a read-only parent", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "/stamp-" + newTestID()[:8]
			if tc.readOnlyParent {
				admin, _ := dial(t, n.Addr(), testSession)
				if _, err := admin.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
				prefix += "/dlock"
				if _, err := admin.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
				if _, err := admin.SetACL(prefix[:lastSlash(prefix)], zk.WorldACL(zk.PermRead), -1); err != nil {
					t.Fatal(err)
				}
			}
			if tc.lockedOut {
				admin, _ := dial(t, n.Addr(), testSession)
				if _, err := admin.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
					t.Fatal(err)
				}
				if _, err := admin.Create(prefix+"/"+stampName, nil, 0, zk.DigestACL(zk.PermAll, "someone", "else")); err != nil {
					t.Fatal(err)
				}
			}
			d := newDriver(t, n.Addr(), prefix)
			ctx := context.Background()
			var last uint64
			for i := range 3 {
				req := acquireReq("k", newTestID(), 10*time.Second)
				res, err := d.Acquire(ctx, req)
				if err != nil || !res.Acquired {
					t.Fatalf("acquire %d: %+v, %v", i, res, err)
				}
				p, _ := d.pathOf(req.ID)
				ok, st, err := d.conn.Exists(p)
				if err != nil || !ok {
					t.Fatalf("stat of %s: %v, %v", p, ok, err)
				}
				if res.Token != uint64(st.Czxid) || res.Token <= last {
					t.Fatalf("acquire %d: token %d, want the node's creation zxid %d, above %d", i, res.Token, st.Czxid, last)
				}
				last = res.Token
				releaseAll(t, d, req)
			}
			if got := d.plainCreates.Load(); got != tc.lockedOut {
				t.Errorf("plain creates: %v, want %v", got, tc.lockedOut)
			}
			req := acquireReq("k", newTestID(), 10*time.Second)
			if res, err := d.Acquire(ctx, req); err != nil || !res.Acquired {
				t.Fatalf("acquire: %+v, %v", res, err)
			}
			infos, err := d.List(ctx, "")
			if err != nil || len(infos) != 1 || infos[0].Key != "k" {
				t.Fatalf("List: %+v, %v; want the one name k", infos, err)
			}
			releaseAll(t, d, req)
		})
	}
}

// Where the prefix will not take the stamp node and the name's node will
// not take a release note (ACLs another client set: create and delete
// allowed, writes not), the driver falls back to plain creates and plain
// deletes: locks are still taken, handed off and released, with the
// nodes' creation zxids as tokens.
func TestWritesRefusedFallBack(t *testing.T) {
	n := zkserver.Shared(t)
	admin, _ := dial(t, n.Addr(), testSession)
	prefix := "/refused-" + newTestID()[:8]
	if _, err := admin.Create(prefix, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Create(prefix+"/k", nil, 0, zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.SetACL(prefix, zk.WorldACL(zk.PermRead), -1); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, n.Addr(), prefix)
	w := newDriver(t, n.Addr(), prefix)
	ctx := context.Background()
	holder := acquireReq("k", newTestID(), 10*time.Second)
	res, err := d.Acquire(ctx, holder)
	if err != nil || !res.Acquired {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	wreq := driver.QueueRequest{Key: "k", ID: newTestID(), Mode: driver.ModeExclusive, TTL: 10 * time.Second, Wait: true, Inbox: "inbox"}
	grants := make(chan driver.Grant, 1)
	gw, err := w.WatchGrants(ctx, "inbox", func(g driver.Grant) { grants <- g })
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if q, err := w.Enqueue(ctx, wreq); err != nil || !q.Queued {
		t.Fatalf("enqueue: %+v, %v", q, err)
	}
	// The holder saw no one: make its release one that notes itself.
	d.update(holder.ID, func(n *ownNode) { n.shared = true })
	releaseAll(t, d, holder)
	g := <-grants
	if !d.plainCreates.Load() || !w.plainCreates.Load() || !d.plainReleases.Load() {
		t.Errorf("plain creates %v and %v, plain releases %v; want all set", d.plainCreates.Load(), w.plainCreates.Load(), d.plainReleases.Load())
	}
	p, _ := w.pathOf(wreq.ID)
	_, st, err := w.conn.Exists(p)
	if err != nil || g.Token != uint64(st.Czxid) || g.Token <= res.Token {
		t.Errorf("grant token %d (%v); want the waiter's creation zxid, above the holder's %d", g.Token, err, res.Token)
	}
	if r, err := w.Release(ctx, []driver.ReleaseRequest{{Key: "k", ID: wreq.ID}}); err != nil || r[0] != driver.Released {
		t.Errorf("release of the waiter's lock: %v, %v", r, err)
	}
}

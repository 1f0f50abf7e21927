package zkdriver

import (
	"context"
	"testing"
	"time"

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

package zkdriver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// A lone holder's release is a plain delete: the waiter that joined
// behind it unseen notes its own grant. A holder that saw others under the
// name notes its release, and the waiter it grants writes nothing. A
// waiter granted because the node ahead ended with its session (no
// release to note) notes its own grant. Each way, Inspect's Since is the
// grant: after the release, or after the session's end, never the earlier
// release that granted the node which ended.
func TestSinceOfAHandOff(t *testing.T) {
	n := zkserver.Shared(t)
	const prefix = "/since"
	a, ad := faultClient(t, n.Addr(), prefix)
	x, _ := faultClient(t, n.Addr(), prefix)
	w, wd := faultClient(t, n.Addr(), prefix)
	h, _ := faultClient(t, n.Addr(), prefix)
	look := newDriver(t, n.Addr(), prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitNodes := func(want int) {
		t.Helper()
		for {
			names, _, err := look.conn.Children(ad.nameNode("k"))
			if err != nil && err != zk.ErrNoNode {
				t.Fatal(err)
			}
			if len(names) == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("the name has %d nodes, want %d", len(names), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	type got struct {
		l   *dlock.Lease
		err error
	}
	lock := func(c *dlock.Client) <-chan got {
		ch := make(chan got, 1)
		go func() { l, err := c.Lock(ctx, "k"); ch <- got{l, err} }()
		return ch
	}
	granted := func(ch <-chan got) *dlock.Lease {
		t.Helper()
		g := <-ch
		if g.err != nil {
			t.Fatal(g.err)
		}
		return g.l
	}
	// check asks Inspect for the holder l and the note the name holds.
	check := func(what string, l *dlock.Lease, after time.Time, wantReleased bool) {
		t.Helper()
		info, ok, err := look.Inspect(ctx, "k")
		if err != nil || !ok {
			t.Fatalf("%s: Inspect: %v, %v", what, ok, err)
		}
		if info.Token != l.Token() || info.Since.Before(after) {
			t.Errorf("%s: Inspect token %d since %v; want %d, since %v or later", what, info.Token, info.Since, l.Token(), after)
		}
		var nt nameNote
		b, _, err := look.conn.Get(ad.nameNode("k"))
		if err != nil || json.Unmarshal(b, &nt) != nil || (nt.Released != "") != wantReleased || (nt.ID != "") == wantReleased {
			t.Errorf("%s: the name's note %+v (%v); want a release's: %v", what, nt, err, wantReleased)
		}
	}

	al, err := a.Lock(ctx, "k") // alone under the name
	if err != nil {
		t.Fatal(err)
	}
	xGot := lock(x)
	waitNodes(2)
	wGot := lock(w)
	waitNodes(3)
	hGot := lock(h)
	waitNodes(4)

	released := time.Now()
	if err := al.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	xl := granted(xGot)
	check("after a lone holder's release", xl, released, false)

	released = time.Now()
	if err := xl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a queued holder's release", granted(wGot), released, true)

	ended := time.Now()
	wd.conn.Close() // the holder's session ends: its node goes, unreleased
	hl := granted(hGot)
	defer func() { _ = hl.Unlock(context.Background()) }()
	check("after the holder's session ended", hl, ended, false)
}

// grantedByRelease reads the note when waiters joined after the release
// (the name's children changed since its data): the release noted there
// granted the waiter only if it is of the node the waiter watched.
func TestGrantedByReleaseReadsTheNote(t *testing.T) {
	n := zkserver.Shared(t)
	d := newDriver(t, n.Addr(), "/byrelease")
	parent := d.nameNode("k")
	if err := d.ensureParent(parent); err != nil {
		t.Fatal(err)
	}
	note, _ := json.Marshal(nameNote{Released: "x-a-0000000003", Since: time.Now().UnixNano()})
	if _, err := d.conn.Set(parent, note, -1); err != nil {
		t.Fatal(err)
	}
	joined := &zk.Stat{Mzxid: 10, Pzxid: 12} // a child changed after the note
	for _, tc := range []struct {
		name    string
		v       verdict
		watched string
		want    bool
	}{
		{"the watched node's release", verdict{byNames: true, name: joined}, parent + "/x-a-0000000003", true},
		{"another node's release", verdict{byNames: true, name: joined}, parent + "/x-b-0000000004", false},
		{"the release is the last change", verdict{byNames: true, name: &zk.Stat{Mzxid: 12, Pzxid: 12}}, parent + "/x-b-0000000004", true},
		{"an expired node judged", verdict{name: &zk.Stat{Mzxid: 12, Pzxid: 12}}, parent + "/x-a-0000000003", false},
	} {
		if got := d.grantedByRelease("k", tc.v, tc.watched); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A grant's note is written only over the note the grant's read saw: a
// release noted since (the new holder unlocked at once, granting the next
// waiter) is newer, and must not be hidden by the older grant's note.
func TestGrantNoteNeverHidesANewerRelease(t *testing.T) {
	n := zkserver.Shared(t)
	d := newDriver(t, n.Addr(), "/latenote")
	parent := d.nameNode("k")
	if err := d.ensureParent(parent); err != nil {
		t.Fatal(err)
	}
	_, seen, err := d.conn.Get(parent) // what the grant's read saw
	if err != nil {
		t.Fatal(err)
	}
	later, _ := json.Marshal(nameNote{Released: "x-w-0000000007", Since: time.Now().UnixNano()})
	if _, err := d.conn.Set(parent, later, -1); err != nil {
		t.Fatal(err)
	}
	d.noteGrant("k", "w", verdict{granted: true, name: seen}, "") // judged, not by names: noted
	var nt nameNote
	if b, _, err := d.conn.Get(parent); err != nil || json.Unmarshal(b, &nt) != nil || nt.Released != "x-w-0000000007" {
		t.Errorf("the name's note: %+v (%v); want the later release's", nt, err)
	}
}

// A waiter granted when its Client asks again (Enqueue with its id, as the
// engine does when the holder's TTL runs out), not by its monitor, notes
// its grant too: a release noted while it waited, of another node, is not
// what granted it, and must not become its Since.
func TestGrantOnEnqueueIsNoted(t *testing.T) {
	n := zkserver.Shared(t)
	d := newDriver(t, n.Addr(), "/enqnote")
	ctx := context.Background()
	holder := acquireReq("k", newTestID(), 10*time.Second)
	if res, err := d.Acquire(ctx, holder); err != nil || !res.Acquired {
		t.Fatalf("acquire: %+v, %v", res, err)
	}
	wreq := driver.QueueRequest{Key: "k", ID: newTestID(), Mode: driver.ModeExclusive, TTL: 10 * time.Second, Wait: true, Inbox: "inbox"}
	if res, err := d.Enqueue(ctx, wreq); err != nil || !res.Queued {
		t.Fatalf("enqueue: %+v, %v", res, err)
	}
	d.stopMonitor(wreq.ID) // only the Enqueue below may grant it
	stale, _ := json.Marshal(nameNote{Released: "x-other-0000000001", Since: time.Now().UnixNano()})
	if _, err := d.conn.Set(d.nameNode("k"), stale, -1); err != nil {
		t.Fatal(err)
	}
	hp, _ := d.pathOf(holder.ID)
	if err := d.conn.Delete(hp, -1); err != nil { // an operator's forced release: no note
		t.Fatal(err)
	}
	asked := time.Now()
	if res, err := d.Enqueue(ctx, wreq); err != nil || !res.Granted {
		t.Fatalf("enqueue again: %+v, %v", res, err)
	}
	info, ok, err := d.Inspect(ctx, "k")
	if err != nil || !ok || info.Since.Before(asked) {
		t.Errorf("Inspect: since %v (ok %v, %v); want the grant, at %v or later", info.Since, ok, err, asked)
	}
}

package zkdriver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
	"github.com/go-zookeeper/zk"
)

// A waiter granted by a holder's release writes nothing: the release noted
// itself in the name's node, and Inspect's Since is that release. A
// waiter granted because the node ahead ended with its session (no release
// to note) notes its own grant: Since is then after that session's end,
// not the earlier release that granted the node which ended.
func TestSinceOfAHandOff(t *testing.T) {
	n := zkserver.Shared(t)
	const prefix = "/since"
	x, xd := faultClient(t, n.Addr(), prefix)
	w, wd := faultClient(t, n.Addr(), prefix)
	h, _ := faultClient(t, n.Addr(), prefix)
	look := newDriver(t, n.Addr(), prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitNodes := func(want int) {
		t.Helper()
		for {
			names, _, err := look.conn.Children(xd.nameNode("k"))
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
	xl, err := x.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		l   *dlock.Lease
		err error
	}
	wGot, hGot := make(chan got, 1), make(chan got, 1)
	go func() { l, err := w.Lock(ctx, "k"); wGot <- got{l, err} }()
	waitNodes(2)
	go func() { l, err := h.Lock(ctx, "k"); hGot <- got{l, err} }()
	waitNodes(3)

	released := time.Now()
	if err := xl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg := <-wGot
	if wg.err != nil {
		t.Fatal(wg.err)
	}
	info, ok, err := look.Inspect(ctx, "k")
	if err != nil || !ok {
		t.Fatalf("Inspect: %v, %v", ok, err)
	}
	if info.Token != wg.l.Token() || info.Since.Before(released) {
		t.Errorf("after the release: Inspect token %d since %v; want %d, since the release at %v", info.Token, info.Since, wg.l.Token(), released)
	}
	var nt nameNote
	if b, _, err := look.conn.Get(xd.nameNode("k")); err != nil || json.Unmarshal(b, &nt) != nil || nt.Released == "" || nt.ID != "" {
		t.Errorf("the name's note after the release: %+v (%v); want the release's, no grant written", nt, err)
	}

	ended := time.Now()
	wd.conn.Close() // the holder's session ends: its node goes, unreleased
	hg := <-hGot
	if hg.err != nil {
		t.Fatal(hg.err)
	}
	defer func() { _ = hg.l.Unlock(context.Background()) }()
	info, ok, err = look.Inspect(ctx, "k")
	if err != nil || !ok {
		t.Fatalf("Inspect: %v, %v", ok, err)
	}
	if info.Token != hg.l.Token() || info.Since.Before(ended) {
		t.Errorf("after the session's end: Inspect token %d since %v; want %d, since the end at %v (the earlier release was at %v)",
			info.Token, info.Since, hg.l.Token(), ended, released)
	}
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

package etcddriver

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// A watch on a member that loses its quorum ends (the watches require a
// leader); the watcher then wakes the key's waiters, who try again, rather
// than leaving them waiting on a silent member. Once the quorum is back,
// the key is watched again and its releases are delivered.
func TestWatchWithoutLeaderWakes(t *testing.T) {
	c := etcdserver.StartCluster(t, 3)
	d := newDriver(t, etcdserver.Client(t, c.Members[0].Addr()))
	woken := make(chan string, 16)
	w, err := d.Watch(func(key string) { woken <- key })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(ctxT(t), "k"); err != nil {
		t.Fatal(err)
	}
	c.Members[1].Kill()
	c.Members[2].Kill()
	select {
	case key := <-woken:
		if key != "k" {
			t.Errorf("woken for %q, want k", key)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no wake-up within 15s of the member losing its quorum")
	}
	c.Members[1].RestartNoWait()
	c.Members[2].RestartNoWait()
	if _, ok := c.Leader(20 * time.Second); !ok {
		t.Fatal("no leader after restarting two members")
	}
	// Drain wake-ups of the outage, then a release must come through.
	id, _ := acquireOKRetry(t, d, "k")
	for len(woken) > 0 {
		<-woken
	}
	if _, err := d.Release(ctxT(t), releaseReq("k", id)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("release after the quorum came back: no notification within 10s")
	}
}

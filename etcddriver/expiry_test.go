package etcddriver

import (
	"testing"
	"time"

	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// watchedNames is how many names d's expiry watch follows now.
func watchedNames(d *Driver) int {
	d.expiry.mu.Lock()
	defer d.expiry.mu.Unlock()
	return len(d.expiry.names)
}

// An expiry watch lasts as long as its waiters' requests say, is extended
// by each of them, and is gone (goroutine and all) when it lapses or the
// driver closes; a keep after Close starts nothing.
func TestExpiryWatchLapsesAndCloses(t *testing.T) {
	m := member(t)
	d := newDriver(t, etcdserver.Client(t, m.Addr()))
	d.expiry.keep("a", 0, 300*time.Millisecond)
	d.expiry.keep("b", 0, time.Hour)
	d.expiry.keep("a", 0, 600*time.Millisecond) // extends a
	if n := watchedNames(d); n != 2 {
		t.Fatalf("%d names watched, want 2", n)
	}
	start := time.Now()
	for watchedNames(d) > 1 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the watch of a did not lapse within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if lapsed := time.Since(start); lapsed < 500*time.Millisecond {
		t.Errorf("the watch of a lapsed after %v: the extension to 600ms was lost", lapsed)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := watchedNames(d); n != 0 {
		t.Errorf("%d names still watched after Close", n)
	}
	d.expiry.keep("c", 0, time.Hour)
	if n := watchedNames(d); n != 0 {
		t.Errorf("keep after Close started a watch (%d names)", n)
	}
}

// A reader's release is told from an expiry by its release marker: the
// Driver of a writer waiting behind readers takes no queue step when one
// of them releases (the releaser's own step does what is to be done). An
// expiry watch that took every deletion for an expiry would read the
// queue once per release in every waiting Client.
func TestExpiryWatchIgnoresReleases(t *testing.T) {
	m := member(t)
	readers, _ := rootClient(t, etcdserver.Client(t, m.Addr()))
	waiter, d := rootClient(t, etcdserver.Client(t, m.Addr()))
	ctx := ctxT(t)
	rw := waiter.RWMutex("rw")
	a, err := readers.RWMutex("rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readers.RWMutex("rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := rw.Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	waitQueue(t, d, "rw", 1)
	if n := watchedNames(d); n != 1 {
		t.Fatalf("%d names watched by the waiter's Driver, want 1", n)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Longer than handoffGrace, after which a deletion taken for an
	// expiry gets its queue step: none may come.
	time.Sleep(3 * handoffGrace)
	if n := d.expiry.steps.Load(); n != 0 {
		t.Errorf("the waiter's Driver took %d queue steps after another Client's reader released, want 0", n)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the writer, after both readers left: %v", err)
	}
}

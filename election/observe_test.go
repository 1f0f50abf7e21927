package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/memdriver"
)

// Observe reports the current leader first, then each change: a local
// campaign at once, another process's within the poll interval, nobody as
// the zero Leader. A reader that falls behind gets the latest value.
func TestObserve(t *testing.T) {
	cs, _ := memClients(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newElection(t, cs[0], "a", election.WithPollInterval(time.Hour)) // local changes only
	b := newElection(t, cs[1], "b")
	obs, err := a.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := recv(t, obs, 5*time.Second, "the first observation"); l.Term != 0 {
		t.Fatalf("first observation %+v, want nobody", l)
	}
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := recv(t, obs, 5*time.Second, "a's campaign"); l.Term != la.Term() || l.Identity != "a" {
		t.Fatalf("observed %+v, want a's term %d", l, la.Term())
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := recv(t, obs, 5*time.Second, "a's resignation"); l.Term != 0 {
		t.Fatalf("observed %+v after resigning, want nobody", l)
	}

	// Another process, seen by polling.
	fast := newElection(t, cs[0], "watcher", election.WithPollInterval(20*time.Millisecond))
	fobs, err := fast.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, fobs, 5*time.Second, "the polling observer's first value")
	lb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := recv(t, fobs, 5*time.Second, "b's campaign, by polling"); l.Term != lb.Term() || l.Identity != "b" {
		t.Fatalf("observed %+v, want b's term %d", l, lb.Term())
	}
	// Not read for three changes: the next read is the latest.
	for range 3 {
		if err := lb.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if lb, err = b.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l := <-fobs:
			if l.Term == lb.Term() {
				lb.Resign(ctx)
				cancel()
				for range fobs { // closed once ctx ends
				}
				return
			}
			if l.Term > lb.Term() {
				t.Fatalf("observed term %d above the latest %d", l.Term, lb.Term())
			}
		case <-deadline:
			t.Fatalf("latest term %d not observed", lb.Term())
		}
	}
}

// noOperator hides the in-memory driver's operator functions (Inspect):
// a driver on which nobody can tell who leads.
type noOperator struct{ driver.Driver }

// On a driver without operator functions Observe is ErrUnsupported, as
// Leader is. Before, it returned a channel that never delivered, not even
// while this process led: every failed read was retried as a store error.
func TestObserveUnsupported(t *testing.T) {
	e := newElection(t, client(t, noOperator{memdriver.New()}), "a")
	ctx := ctxTimeout(t, 10*time.Second)
	if _, _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("Leader: %v, want ErrUnsupported", err)
	}
	ch, err := e.Observe(ctx)
	if !errors.Is(err, dlock.ErrUnsupported) || ch != nil {
		t.Fatalf("Observe: channel %v, err %v; want no channel and ErrUnsupported", ch, err)
	}
}

package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/memdriver"
)

// One leader at a time; a second candidate waits, wins once the first
// resigns, with a higher term; Leader reports who leads.
func TestCampaignResign(t *testing.T) {
	cs, _ := memClients(t, 2)
	ctx := ctxTimeout(t, 10*time.Second)
	a, b := newElection(t, cs[0], "a"), newElection(t, cs[1], "b")
	if _, ok, err := a.Leader(ctx); err != nil || ok {
		t.Fatalf("Leader before any campaign: ok=%v, %v", ok, err)
	}
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if la.Err() != nil {
		t.Fatalf("new leader's Err = %v", la.Err())
	}
	who, ok, err := b.Leader(ctx)
	if err != nil || !ok || who.Term != la.Term() || who.Identity != "a" {
		t.Fatalf("Leader = %+v ok=%v %v; want a's term %d", who, ok, err, la.Term())
	}
	won := make(chan *election.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- lb
	}()
	// b cannot win while a leads.
	select {
	case <-won:
		t.Fatal("second candidate won while the first led")
	default:
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(la.Context()), election.ErrResigned) || !errors.Is(la.Err(), election.ErrResigned) {
		t.Errorf("resigned term's cause = %v, Err = %v", context.Cause(la.Context()), la.Err())
	}
	if err := la.Resign(ctx); err != nil {
		t.Errorf("second Resign: %v", err)
	}
	lb := recv(t, won, 5*time.Second, "the second candidate to win")
	if lb == nil {
		t.FailNow()
	}
	defer lb.Resign(ctx)
	if lb.Term() <= la.Term() {
		t.Fatalf("second term %d not above first %d", lb.Term(), la.Term())
	}
	if who, _, _ := a.Leader(ctx); who.Identity != "b" || who.Term != lb.Term() {
		t.Errorf("Leader after the handover = %+v", who)
	}
}

// Run releases the lock only after fn returned: fn, winding down after
// ctx ended, still finds its own term in the store.
func TestRunReleasesAfterFnReturns(t *testing.T) {
	cs, _ := memClients(t, 1)
	e := newElection(t, cs[0], "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan uint64, 1)
	stillHeld := make(chan bool, 1)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, term uint64) error {
			started <- term
			<-ctx.Done()
			info, ok, err := cs[0].Inspect(context.Background(), "leader")
			stillHeld <- err == nil && ok && info.Token == term
			return nil
		})
	}()
	term := recv(t, started, 5*time.Second, "fn to start")
	cancel()
	if !recv(t, stillHeld, 5*time.Second, "fn to wind down") {
		t.Error("the lock was released before fn returned")
	}
	if err := recv(t, done, 5*time.Second, "Run to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: %v", err)
	}
	if _, ok, _ := cs[0].Inspect(context.Background(), "leader"); ok {
		t.Errorf("lock of term %d still held after Run returned", term)
	}
}

// A leader whose renewals stall steps down — its context ends with
// ErrSteppedDown — before its lease can expire, and so before the next
// leader can win; the next term is higher.
func TestStalledLeaderStepsDownBeforeNextLeader(t *testing.T) {
	cs, drvs := memClients(t, 2)
	ctx := ctxTimeout(t, 10*time.Second)
	const ttl = 600 * time.Millisecond
	a := newElection(t, cs[0], "a", election.WithLockOptions(dlock.WithTTL(ttl)))
	b := newElection(t, cs[1], "b", election.WithLockOptions(dlock.WithTTL(ttl)))
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(ctx)
	bWon := make(chan *election.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		bWon <- lb
	}()
	// a's store connection stalls: renewals (and nothing else) hang.
	drvs[0].SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRenew {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	<-la.Done()
	stepped := time.Now()
	select {
	case <-bWon:
		t.Fatal("b won before a's term ended")
	default:
	}
	if !errors.Is(la.Err(), election.ErrSteppedDown) {
		t.Errorf("a's term ended with %v, want ErrSteppedDown", la.Err())
	}
	if !stepped.Before(la.Deadline()) {
		t.Errorf("a stepped down at %v, not before its lease's deadline %v", stepped, la.Deadline())
	}
	lb := recv(t, bWon, 5*time.Second, "b to win")
	if lb == nil {
		t.FailNow()
	}
	defer lb.Resign(ctx)
	if lb.Term() <= la.Term() {
		t.Errorf("b's term %d not above a's %d", lb.Term(), la.Term())
	}
}

package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/memdriver"
)

// The term is a fencing token: after a new leader wrote with its term, a
// write from the deposed leader (one that kept acting after its term
// ended, as a paused process does) is refused by the guarded resource.
func TestTermFencesDeposedLeader(t *testing.T) {
	cs, drvs := memClients(t, 2)
	ctx := ctxTimeout(t, 10*time.Second)
	guard := fence.NewMemory()
	write := func(term uint64) error {
		return guard.Apply(ctx, "billing", term, func(context.Context) error { return nil })
	}
	opt := election.WithLockOptions(dlock.WithTTL(300 * time.Millisecond))
	a, b := newElection(t, cs[0], "a", opt), newElection(t, cs[1], "b", opt)
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Resign(ctx)
	if err := write(la.Term()); err != nil {
		t.Fatal(err)
	}
	drvs[0].SetFault(func(ctx context.Context, op string) error {
		if op == memdriver.OpRenew {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	lb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Resign(ctx)
	if la.Err() == nil {
		t.Fatal("a still leads while b does")
	}
	if err := write(lb.Term()); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	err = write(la.Term())
	var stale *fence.StaleTokenError
	if !errors.Is(err, fence.ErrStaleToken) || !errors.As(err, &stale) || stale.Highest != lb.Term() {
		t.Fatalf("deposed leader's write: %v, want ErrStaleToken with b's term %d", err, lb.Term())
	}
}

package election_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
	"github.com/dlockio/dlock/memdriver"
)

// Run: lead until ctx ends or the term is lost, with the term passed to
// every guarded write. Here the leader does one job and returns, which
// resigns.
func ExampleElection_Run() {
	locker, err := dlock.New(memdriver.New()) // redisdriver.Open(...) in production
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	e, err := election.New(locker, "billing-leader", election.WithIdentity("billing-7"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	err = e.Run(ctx, func(ctx context.Context, term uint64) error {
		who, _, _ := e.Leader(ctx)
		fmt.Println("leading:", who.Identity, "term > 0:", term > 0, "same term:", who.Term == term)
		return nil // a long-running leader would work until <-ctx.Done()
	})
	fmt.Println("run:", err)
	_, leading, _ := e.Leader(ctx)
	fmt.Println("anyone leading after Run:", leading)
	// Output:
	// leading: billing-7 term > 0: true same term: true
	// run: <nil>
	// anyone leading after Run: false
}

// Campaign and Resign, for callers that manage the term themselves; a
// second candidate wins with a higher term.
func ExampleElection_Campaign() {
	locker, err := dlock.New(memdriver.New())
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	a, _ := election.New(locker, "leader", election.WithIdentity("a"))
	b, _ := election.New(locker, "leader", election.WithIdentity("b"))
	ctx := context.Background()

	la, err := a.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... lead: stop when la.Done() is closed ...
	if err := la.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	lb, err := b.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lb.Resign(ctx)
	fmt.Println("a's term ended:", la.Err())
	fmt.Println("b's term is higher:", lb.Term() > la.Term())
	// Output:
	// a's term ended: election: resigned
	// b's term is higher: true
}

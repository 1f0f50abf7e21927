package dlock_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// lostLog is an Observer that only cares about lost leases: it embeds
// BaseObserver for the rest.
type lostLog struct {
	dlock.BaseObserver
	mu   sync.Mutex
	seen []string
}

func (o *lostLog) Lost(ev dlock.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, ev.Key+": "+ev.Reason)
}

// An Observer sees what the Client does, off the lock's path; Stats gives
// the Client's counters at any time.
func ExampleWithObserver() {
	obs := &lostLog{}
	locker, err := dlock.New(memdriver.New(), dlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	// A fixed lease of 50 ms that nobody unlocks: it is lost at its deadline.
	lease, err := locker.Lock(ctx, "nightly-report", dlock.WithTTL(50*time.Millisecond), dlock.WithoutWatchdog())
	if err != nil {
		log.Fatal(err)
	}
	<-lease.Done()
	_ = locker.Close() // delivers the events still queued

	obs.mu.Lock()
	fmt.Println(obs.seen)
	obs.mu.Unlock()
	s := locker.Stats()
	fmt.Println("acquired:", s.Acquired, "held:", s.Held)
	// Output:
	// [nightly-report: deadline]
	// acquired: 1 held: 0
}

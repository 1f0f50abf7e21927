package cli

import (
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock"
)

// lossReasonWait bounds the wait for the Client's report of why the lease
// was lost: its observer gets events in batches about 100 ms apart.
const lossReasonWait = 2 * time.Second

// lossWatch learns from the run's Client why its lease was lost, which
// Lease.Err does not say (it is ErrLockLost whatever the cause), so that
// the exit message can tell a store outage from a lock taken away.
type lossWatch struct {
	dlock.BaseObserver
	lost chan string // the first LostEvent's reason
	mu   sync.Mutex
	// renewErr is the last renewal's failure; nil once one succeeds.
	renewErr error
	why      string // the reason, once reason has it
}

func newLossWatch() *lossWatch { return &lossWatch{lost: make(chan string, 1)} }

func (w *lossWatch) Lost(e dlock.LostEvent) {
	select {
	case w.lost <- e.Reason:
	default:
	}
}

func (w *lossWatch) Renew(e dlock.RenewEvent) {
	w.mu.Lock()
	w.renewErr = e.Err
	w.mu.Unlock()
}

// reason says why the lease was lost, waiting up to lossReasonWait for the
// Client's report; "" if none came.
func (w *lossWatch) reason() string {
	if w.why != "" {
		return w.why
	}
	t := time.NewTimer(lossReasonWait)
	defer t.Stop()
	select {
	case r := <-w.lost:
		w.why = w.describe(r)
	case <-t.C:
	}
	return w.why
}

func (w *lossWatch) describe(reason string) string {
	w.mu.Lock()
	renewErr := w.renewErr
	w.mu.Unlock()
	switch {
	case reason == dlock.LostNotHeld:
		return takenAway
	case reason == dlock.LostDeadline && renewErr != nil:
		return fmt.Sprintf("the store was unreachable or failing until its TTL ran out (last renewal error: %v)", renewErr)
	case reason == dlock.LostDeadline:
		return "its TTL ran out before a renewal was answered (dlock was stopped, or the store did not answer in time)"
	}
	return ""
}

// takenAway is a lock the store no longer has as the run's.
const takenAway = "the store no longer had it as this run's (broken by dlock unlock --force, expired there, or lost with the store's data)"

// because is ": reason", or "" for no reason.
func because(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// teeObserver hands every event to each of its observers in turn: the
// run's lossWatch and the metrics exporter's.
type teeObserver []dlock.Observer

func (t teeObserver) Acquire(e dlock.AcquireEvent) {
	for _, o := range t {
		o.Acquire(e)
	}
}

func (t teeObserver) Release(e dlock.ReleaseEvent) {
	for _, o := range t {
		o.Release(e)
	}
}

func (t teeObserver) Renew(e dlock.RenewEvent) {
	for _, o := range t {
		o.Renew(e)
	}
}

func (t teeObserver) Lost(e dlock.LostEvent) {
	for _, o := range t {
		o.Lost(e)
	}
}

func (t teeObserver) Wait(e dlock.WaitEvent) {
	for _, o := range t {
		o.Wait(e)
	}
}

func (t teeObserver) BackendError(e dlock.BackendErrorEvent) {
	for _, o := range t {
		o.BackendError(e)
	}
}

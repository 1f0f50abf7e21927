package election_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/election"
)

// A term lost while fn runs ends fn's context with the lease's error; Run
// campaigns again and fn runs again with a higher term.
func TestRunCampaignsAgainAfterLoss(t *testing.T) {
	cs, _ := memClients(t, 2)
	e := newElection(t, cs[0], "a", election.WithLockOptions(dlock.WithTTL(time.Second)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terms := make(chan uint64, 2)
	causes := make(chan error, 2)
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, term uint64) error {
			terms <- term
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
	}()
	first := recv(t, terms, 5*time.Second, "the first term")
	// An operator breaks the lock: a learns at its next renewal.
	if _, ok, err := cs[1].ForceRelease(ctx, "leader"); err != nil || !ok {
		t.Fatalf("ForceRelease: %v %v", ok, err)
	}
	if cause := recv(t, causes, 5*time.Second, "the first term to end"); !errors.Is(cause, dlock.ErrLockLost) {
		t.Errorf("first term ended with %v, want dlock.ErrLockLost", cause)
	}
	second := recv(t, terms, 5*time.Second, "the second term")
	if second <= first {
		t.Errorf("second term %d not above first %d", second, first)
	}
	cancel()
	if err := recv(t, done, 5*time.Second, "Run to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

// A process that never won never runs fn: Run, cancelled while another
// leads, returns the ctx error and fn was not called.
func TestRunNeverLedNeverCallsFn(t *testing.T) {
	cs, _ := memClients(t, 2)
	holder := newElection(t, cs[0], "holder")
	ctx := ctxTimeout(t, 10*time.Second)
	l, err := holder.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign(ctx)
	e := newElection(t, cs[1], "never")
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	var called atomic.Bool
	err = e.Run(rctx, func(context.Context, uint64) error { called.Store(true); return nil })
	if !errors.Is(err, context.DeadlineExceeded) || called.Load() {
		t.Fatalf("Run that never led: %v, fn called: %v", err, called.Load())
	}
	if l.Err() != nil {
		t.Errorf("the leader's term ended: %v", l.Err())
	}
}

// fn returning by itself while leading resigns and returns its error.
func TestRunFnReturns(t *testing.T) {
	cs, _ := memClients(t, 1)
	e := newElection(t, cs[0], "a")
	ctx := ctxTimeout(t, 10*time.Second)
	boom := errors.New("boom")
	if err := e.Run(ctx, func(context.Context, uint64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want fn's error", err)
	}
	if _, ok, _ := e.Leader(ctx); ok {
		t.Error("still leading after fn returned")
	}
	if err := e.Run(ctx, func(context.Context, uint64) error { return nil }); err != nil {
		t.Fatalf("Run of a fn returning nil: %v", err)
	}
}

// Run returns within resignTimeout (5 s) of its ctx ending, even with the
// store not answering: the lock's release then goes on in the background.
// Before, Run resigned with the cancellation stripped and no bound, and
// waited on the store for as long as the driver let it (forever on a store
// that answers nothing).
func TestRunReturnsWhenCtxEndsWithTheStoreStalled(t *testing.T) {
	cs, drvs := memClients(t, 1)
	e := newElection(t, cs[0], "a")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, func(ctx context.Context, _ uint64) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not lead within 10s")
	}
	// Every request from now on waits for its ctx to end.
	drvs[0].SetFault(func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() })
	defer drvs[0].SetFault(nil) // before the Client's Close (cleanups run later)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run had not returned 10s after its ctx was cancelled, with the store stalled")
	}
}

// Bad input is ErrInvalidArgument, never a panic.
func TestBadInput(t *testing.T) {
	cs, _ := memClients(t, 1)
	checks := map[string]error{}
	_, checks["nil client"] = election.New(nil, "k")
	_, checks["empty key"] = election.New(cs[0], "")
	_, checks["nil option"] = election.New(cs[0], "k", nil)
	_, checks["margin 0"] = election.New(cs[0], "k", election.WithStepDownMargin(0))
	_, checks["poll 0"] = election.New(cs[0], "k", election.WithPollInterval(0))
	_, checks["retry -1"] = election.New(cs[0], "k", election.WithRetryDelay(-1))
	_, checks["nil lock option"] = election.New(cs[0], "k", election.WithLockOptions(nil))
	e := newElection(t, cs[0], "a", election.WithStepDownMargin(time.Hour))
	_, checks["margin above TTL/2"] = e.Campaign(ctxTimeout(t, 5*time.Second))
	checks["nil fn"] = e.Run(context.Background(), nil)
	//lint:ignore SA1012 a nil context is the bad input under test
	checks["nil ctx"] = e.Run(nil, func(context.Context, uint64) error { return nil })
	//lint:ignore SA1012 a nil context is the bad input under test
	obs, observeErr := e.Observe(nil)
	checks["Observe, nil ctx"] = observeErr
	if obs != nil {
		t.Error("Observe(nil) returned a channel")
	}
	for what, err := range checks {
		if !errors.Is(err, election.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	if _, ok, _ := e.Leader(context.Background()); ok {
		t.Error("a refused campaign left the lock held")
	}
}

// A Campaign under the term's own context does not nest into the term
// (dlock's reentrancy): it fails with dlock.ErrReentry.
func TestCampaignUnderOwnTermIsRefused(t *testing.T) {
	cs, _ := memClients(t, 1)
	e := newElection(t, cs[0], "a")
	ctx := ctxTimeout(t, 10*time.Second)
	err := e.Run(ctx, func(ctx context.Context, term uint64) error {
		l, err := e.Campaign(ctx)
		if err == nil {
			l.Resign(ctx)
			return errors.New("a second Leadership of the same term")
		}
		if !errors.Is(err, dlock.ErrReentry) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

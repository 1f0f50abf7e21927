package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// runUntilLost runs "sleep 30" under the lock k on m, calls lose once the
// lock is held, and returns the run's status and stderr.
func runUntilLost(t *testing.T, m *memBackend, lose func()) (int, string) {
	t.Helper()
	opts := Options{Backends: []Backend{m.backend()}}
	var stderr lockedBuffer
	env := Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), []string{"run", "--mem", "m", "--ttl", "300ms", "--grace", "1s", "k", "--", "sleep", "30"}, env, opts)
	}()
	for deadline := time.Now().Add(10 * time.Second); !m.held(t, "k"); {
		if time.Now().After(deadline) {
			t.Fatalf("lock not held within 10 s; stderr %q", stderr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("run ended with %d before holding the lock; stderr %q", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	lose()
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end within 30 s of losing its lock")
		return 0, ""
	}
}

// TestLostLockSaysWhy: the message of a lost lock tells a lock taken
// away in the store (unlock --force) from a store that stopped answering.
func TestLostLockSaysWhy(t *testing.T) {
	t.Run("force-released", func(t *testing.T) {
		m := newMemBackend(t)
		code, stderr := runUntilLost(t, m, func() {
			if _, ok, err := m.drv.ForceRelease(context.Background(), "k"); !ok || err != nil {
				t.Errorf("ForceRelease: %v, %v", ok, err)
			}
		})
		if code != ExitLockLost || !strings.Contains(stderr, "was lost while sleep ran: "+takenAway+"; ") {
			t.Errorf("status %d, stderr %q; want %d saying the lock was taken away", code, stderr, ExitLockLost)
		}
	})
	t.Run("store unreachable", func(t *testing.T) {
		m := newMemBackend(t)
		down := errors.New("store down for the test")
		code, stderr := runUntilLost(t, m, func() {
			m.conn(0).SetFault(func(_ context.Context, op string) error {
				if op == memdriver.OpRenew {
					return down
				}
				return nil
			})
		})
		if code != ExitLockLost || !strings.Contains(stderr, "the store was unreachable or failing until its TTL ran out") ||
			!strings.Contains(stderr, down.Error()) {
			t.Errorf("status %d, stderr %q; want %d naming the outage and its error", code, stderr, ExitLockLost)
		}
	})
}

func TestLossWatchReasons(t *testing.T) {
	failed := errors.New("connection refused")
	for _, tc := range []struct {
		renewals []error // the Renew events before the loss, in order
		reason   string
		want     string
	}{
		{nil, dlock.LostNotHeld, takenAway},
		{[]error{failed}, dlock.LostDeadline, "unreachable or failing until its TTL ran out (last renewal error: connection refused)"},
		// A renewal that succeeded after the failures: no outage to blame.
		{[]error{failed, nil}, dlock.LostDeadline, "before a renewal was answered (dlock was stopped"},
		{nil, dlock.LostDeadline, "before a renewal was answered (dlock was stopped"},
	} {
		w := newLossWatch()
		for _, err := range tc.renewals {
			w.Renew(dlock.RenewEvent{Leases: 1, Err: err})
		}
		w.Lost(dlock.LostEvent{Key: "k", Reason: tc.reason})
		if got := w.reason(); !strings.Contains(got, tc.want) {
			t.Errorf("renewals %v, lost %s: reason %q, want %q in it", tc.renewals, tc.reason, got, tc.want)
		}
	}
}

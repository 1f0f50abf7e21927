// Package oncetest is the conformance suite every once.Store runs.
//
// A store's test calls Run with a Harness that makes stores on a real
// server. The suite checks the Store contract (claims, takeovers by a
// newer token, refusals of an older token or another payload, completion
// and failure checked by token, retries, expiry, binary results, a race of
// many claimers, a restart of the server) and then runs a once.Processor
// on the store, with locks from the in-memory driver, through duplicates,
// failures and lost leases.
//
// Every key is named after the subtest that uses it, so stores sharing a
// server do not collide. Subtests run in parallel except the restart.
package oncetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/once"
)

// Harness tells the suite how to make and restart a store.
type Harness struct {
	// New returns a store; called once per subtest, from parallel
	// subtests. Stores from one Harness may share a server.
	New func(t *testing.T) once.Store
	// Restart, if set, restarts the server of the stores New made. The
	// records must survive it (a durable configuration); the first calls
	// after it may fail while connections are re-established, which the
	// suite retries for up to Timeout.
	Restart func(t *testing.T)
	// Timeout bounds each wait for something that should happen promptly
	// (an expiry, a restarted server answering). Zero means 10 seconds.
	Timeout time.Duration
}

// Run runs the suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("oncetest: Harness.New is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = 10 * time.Second
	}
	t.Run("Restart", func(t *testing.T) { testRestart(t, h) })
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"ClaimFresh", testClaimFresh},
		{"ClaimRepeated", testClaimRepeated},
		{"Takeover", testTakeover},
		{"OlderToken", testOlderToken},
		{"PayloadMismatch", testPayloadMismatch},
		{"Complete", testComplete},
		{"FailRetried", testFailRetried},
		{"FinishWithoutClaim", testFinishWithoutClaim},
		{"Expiry", testExpiry},
		{"Results", testResults},
		{"LargeTokens", testLargeTokens},
		{"Keys", testKeys},
		{"BadInput", testBadInput},
		{"Race", testRace},
		{"ProcessorDuplicates", testProcessorDuplicates},
		{"ProcessorMismatch", testProcessorMismatch},
		{"ProcessorFailure", testProcessorFailure},
		{"ProcessorLostLease", testProcessorLostLease},
	}
	t.Run("Contract", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.fn(t, h)
			})
		}
	})
}

// env is one subtest's store and helpers.
type env struct {
	t *testing.T
	h Harness
	s once.Store
}

func newEnv(t *testing.T, h Harness) *env {
	s := h.New(t)
	if s == nil {
		t.Fatal("Harness.New returned nil")
	}
	return &env{t: t, h: h, s: s}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), e.h.Timeout)
	e.t.Cleanup(cancel)
	return ctx
}

// key names a record after the subtest, so that stores sharing a server
// do not collide.
func (e *env) key(name string) string {
	return "oncetest/" + strings.ReplaceAll(e.t.Name(), "/", ".") + "/" + name
}

func hash(payload string) []byte {
	s := sha256.Sum256([]byte(payload))
	return s[:]
}

const ttl = time.Minute

func (e *env) claim(key string, token uint64, h []byte) (once.Record, bool) {
	e.t.Helper()
	rec, ok, err := e.s.Claim(e.ctx(), key, token, h, ttl)
	if err != nil {
		e.t.Fatalf("Claim(%q, %d): %v", key, token, err)
	}
	return rec, ok
}

func (e *env) mustClaim(key string, token uint64, h []byte) once.Record {
	e.t.Helper()
	rec, ok := e.claim(key, token, h)
	if !ok {
		e.t.Fatalf("Claim(%q, %d): refused, record %s", key, token, describe(rec))
	}
	return rec
}

func (e *env) get(key string) (once.Record, bool) {
	e.t.Helper()
	rec, ok, err := e.s.Get(e.ctx(), key)
	if err != nil {
		e.t.Fatalf("Get(%q): %v", key, err)
	}
	return rec, ok
}

// want checks key's record.
func (e *env) want(key string, state once.State, token uint64, result string) {
	e.t.Helper()
	rec, ok := e.get(key)
	if !ok {
		e.t.Fatalf("Get(%q): no record, want %v under token %d", key, state, token)
	}
	if rec.State != state || rec.Token != token || (state == once.Completed && string(rec.Result) != result) {
		e.t.Fatalf("Get(%q) = %s, want %v under token %d (result %q)", key, describe(rec), state, token, result)
	}
	if rec.Key != key {
		e.t.Errorf("record key %q, want %q", rec.Key, key)
	}
}

func describe(r once.Record) string {
	return fmt.Sprintf("{%v token %d hash %x… result %q expires in %v}", r.State, r.Token, r.PayloadHash[:min(4, len(r.PayloadHash))], r.Result, time.Until(r.ExpiresAt).Round(time.Millisecond))
}

// eventually retries f until it returns nil or the harness timeout passes.
func (e *env) eventually(what string, f func() error) {
	e.t.Helper()
	deadline := time.Now().Add(e.h.Timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: still failing after %v: %v", what, e.h.Timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

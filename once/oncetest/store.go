package oncetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/once"
)

// A fresh key is claimed: in progress, with the token, the hash and an
// expiry about ttl away.
func testClaimFresh(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	if _, ok := e.get(k); ok {
		t.Fatal("Get of an unused key found a record")
	}
	before := time.Now()
	rec := e.mustClaim(k, 7, hash("p"))
	if rec.State != once.InProgress || rec.Token != 7 || !bytes.Equal(rec.PayloadHash, hash("p")) || len(rec.Result) != 0 {
		t.Fatalf("claimed record = %s", describe(rec))
	}
	e.want(k, once.InProgress, 7, "")
	got, _ := e.get(k)
	// A server clock may differ from ours a little; a second is generous.
	if got.ExpiresAt.Before(before.Add(ttl-time.Second)) || got.ExpiresAt.After(time.Now().Add(ttl+time.Second)) {
		t.Errorf("ExpiresAt in %v, want about %v", time.Until(got.ExpiresAt), ttl)
	}
}

// The same claim repeated (a retry after a lost reply) is claimed again.
func testClaimRepeated(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	e.mustClaim(k, 7, hash("p"))
	e.mustClaim(k, 7, hash("p"))
	e.want(k, once.InProgress, 7, "")
}

// A newer token takes an in-progress record over (the old worker's lease
// was lost); the old worker can then neither complete nor fail it.
func testTakeover(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	e.mustClaim(k, 5, hash("p"))
	e.mustClaim(k, 9, hash("p"))
	if err := e.s.Complete(e.ctx(), k, 5, []byte("old"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Complete by the old token after a takeover: %v, want ErrClaimLost", err)
	}
	if err := e.s.Fail(e.ctx(), k, 5, ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Fail by the old token after a takeover: %v, want ErrClaimLost", err)
	}
	e.want(k, once.InProgress, 9, "")
	if err := e.s.Complete(e.ctx(), k, 9, []byte("new"), ttl); err != nil {
		t.Fatalf("Complete by the new token: %v", err)
	}
	e.want(k, once.Completed, 9, "new")
}

// An older token never takes a record over.
func testOlderToken(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	e.mustClaim(k, 9, hash("p"))
	if rec, ok := e.claim(k, 5, hash("p")); ok || rec.Token != 9 || rec.State != once.InProgress {
		t.Fatalf("Claim by an older token: claimed=%v, record %s; want refused with the newer record", ok, describe(rec))
	}
	e.s.Fail(e.ctx(), k, 9, ttl)
	if rec, ok := e.claim(k, 5, hash("p")); ok || rec.State != once.Failed {
		t.Fatalf("Claim of a failed record by an older token: claimed=%v, record %s", ok, describe(rec))
	}
	e.want(k, once.Failed, 9, "")
}

// Another payload never claims a live record, whatever its state.
func testPayloadMismatch(t *testing.T, h Harness) {
	e := newEnv(t, h)
	for _, state := range []once.State{once.InProgress, once.Completed, once.Failed} {
		k := e.key(state.String())
		e.mustClaim(k, 5, hash("a"))
		switch state {
		case once.Completed:
			if err := e.s.Complete(e.ctx(), k, 5, []byte("r"), ttl); err != nil {
				t.Fatal(err)
			}
		case once.Failed:
			if err := e.s.Fail(e.ctx(), k, 5, ttl); err != nil {
				t.Fatal(err)
			}
		}
		rec, ok := e.claim(k, 9, hash("b"))
		if ok || !bytes.Equal(rec.PayloadHash, hash("a")) || rec.State != state || rec.Token != 5 {
			t.Errorf("%v record: Claim with another payload: claimed=%v, record %s", state, ok, describe(rec))
		}
	}
}

// A completed record keeps its result, refuses every claim, and accepts a
// repeated Complete by its own token (a retry) but nothing else.
func testComplete(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	e.mustClaim(k, 5, hash("p"))
	if err := e.s.Complete(e.ctx(), k, 5, []byte("done"), ttl); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(e.ctx(), k, 5, []byte("done"), ttl); err != nil {
		t.Fatalf("repeated Complete by the same token: %v", err)
	}
	rec, ok := e.claim(k, 99, hash("p"))
	if ok || rec.State != once.Completed || string(rec.Result) != "done" || rec.Token != 5 {
		t.Fatalf("Claim of a completed record: claimed=%v, record %s", ok, describe(rec))
	}
	if err := e.s.Fail(e.ctx(), k, 5, ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Fail of a completed record: %v, want ErrClaimLost", err)
	}
	if err := e.s.Complete(e.ctx(), k, 6, []byte("other"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Complete by another token: %v, want ErrClaimLost", err)
	}
	e.want(k, once.Completed, 5, "done")
}

// A failed record is claimed by the next (newer) delivery and can then be
// completed.
func testFailRetried(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	e.mustClaim(k, 5, hash("p"))
	if err := e.s.Fail(e.ctx(), k, 5, ttl); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Fail(e.ctx(), k, 5, ttl); err != nil {
		t.Fatalf("repeated Fail: %v", err)
	}
	e.want(k, once.Failed, 5, "")
	if err := e.s.Complete(e.ctx(), k, 5, []byte("late"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Complete of a failed record: %v, want ErrClaimLost", err)
	}
	e.mustClaim(k, 6, hash("p"))
	if err := e.s.Complete(e.ctx(), k, 6, []byte("ok"), ttl); err != nil {
		t.Fatal(err)
	}
	e.want(k, once.Completed, 6, "ok")
}

// Complete and Fail of a key nobody claimed change nothing.
func testFinishWithoutClaim(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	if err := e.s.Complete(e.ctx(), k, 5, []byte("x"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Errorf("Complete without a claim: %v, want ErrClaimLost", err)
	}
	if err := e.s.Fail(e.ctx(), k, 5, ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Errorf("Fail without a claim: %v, want ErrClaimLost", err)
	}
	if rec, ok := e.get(k); ok {
		t.Errorf("record appeared: %s", describe(rec))
	}
}

// A record is gone after its expiry, and its key is new again: any token,
// any payload. Complete resets the expiry to its own ttl.
func testExpiry(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	const short = 300 * time.Millisecond
	if _, ok, err := e.s.Claim(e.ctx(), k, 50, hash("a"), time.Hour); err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	if err := e.s.Complete(e.ctx(), k, 50, []byte("r"), short); err != nil {
		t.Fatal(err)
	}
	e.want(k, once.Completed, 50, "r")
	e.eventually("completed record expiring", func() error {
		if rec, ok := e.get(k); ok {
			return fmt.Errorf("still there: %s", describe(rec))
		}
		return nil
	})
	if _, ok, err := e.s.Claim(e.ctx(), k, 3, hash("b"), short); err != nil || !ok {
		t.Fatalf("Claim after expiry, older token and other payload: claimed=%v, %v", ok, err)
	}
	e.eventually("in-progress record expiring", func() error {
		if _, ok := e.get(k); ok {
			return errors.New("still there")
		}
		return nil
	})
	if err := e.s.Complete(e.ctx(), k, 3, []byte("late"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Complete after the record expired: %v, want ErrClaimLost", err)
	}
}

// Results are bytes: binary, empty and large ones come back unchanged.
func testResults(t *testing.T, h Harness) {
	e := newEnv(t, h)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for name, r := range map[string][]byte{
		"binary": {0, 1, 0xff, 0xfe, '\n', '"', '\\', 0},
		"empty":  {},
		"text":   []byte("order 42 shipped ✓"),
		"big":    big,
	} {
		k := e.key(name)
		e.mustClaim(k, 5, hash(name))
		if err := e.s.Complete(e.ctx(), k, 5, r, ttl); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec, ok := e.get(k)
		if !ok || !bytes.Equal(rec.Result, r) {
			t.Errorf("%s: result of %d bytes came back as %d bytes (found %v)", name, len(r), len(rec.Result), ok)
		}
		if cl, claimed := e.claim(k, 6, hash(name)); claimed || !bytes.Equal(cl.Result, r) {
			t.Errorf("%s: Claim of the completed record: claimed=%v, result of %d bytes", name, claimed, len(cl.Result))
		}
	}
}

// Tokens are compared exactly across the whole uint64 range a store
// accepts: neighbours above 2^53 (where a float would merge them) are
// told apart.
func testLargeTokens(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	const base = uint64(1)<<62 + 1
	e.mustClaim(k, base+1, hash("p"))
	if _, ok := e.claim(k, base, hash("p")); ok {
		t.Fatal("token 2^62+1 claimed over 2^62+2")
	}
	if err := e.s.Complete(e.ctx(), k, base, []byte("x"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("Complete by 2^62+1 of a record of 2^62+2: %v", err)
	}
	e.mustClaim(k, base+2, hash("p"))
	e.want(k, once.InProgress, base+2, "")
	// Ordering across a change in the number of digits.
	k2 := e.key("digits")
	e.mustClaim(k2, 999, hash("p"))
	e.mustClaim(k2, 1000, hash("p"))
	if _, ok := e.claim(k2, 999, hash("p")); ok {
		t.Fatal("token 999 claimed over 1000")
	}
}

// Keys are opaque: spaces, braces, unicode, a long one; each is its own.
func testKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	names := []string{"a b", "{x}", "}{", "ключ", "a:b:c", "%s", strings.Repeat("k", 900)}
	for i, n := range names {
		e.mustClaim(e.key(n), uint64(i+1), hash(n))
	}
	for i, n := range names {
		e.want(e.key(n), once.InProgress, uint64(i+1), "")
	}
}

// Bad input is an error matching ErrInvalidArgument; a done ctx fails the
// call with an error and changes nothing.
func testBadInput(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("k")
	ctx := e.ctx()
	checks := map[string]error{}
	_, _, checks["Claim empty key"] = e.s.Claim(ctx, "", 1, hash("p"), ttl)
	_, _, checks["Claim ttl 0"] = e.s.Claim(ctx, k, 1, hash("p"), 0)
	checks["Complete ttl -1"] = e.s.Complete(ctx, "", 1, nil, -1)
	checks["Fail empty key"] = e.s.Fail(ctx, "", 1, ttl)
	_, _, checks["Get empty key"] = e.s.Get(ctx, "")
	for what, err := range checks {
		if !errors.Is(err, once.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := e.s.Claim(done, k, 1, hash("p"), ttl); err == nil {
		t.Error("Claim with a done ctx: no error")
	}
	if rec, ok := e.get(k); ok {
		t.Errorf("bad calls left a record: %s", describe(rec))
	}
}

// Many claimers race on one key, each then completing: exactly one
// completion succeeds, and the record holds its token and result.
func testRace(t *testing.T, h Harness) {
	e := newEnv(t, h)
	for round := range 5 {
		k := e.key(fmt.Sprint(round))
		const n = 12
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				tok := uint64(i + 1)
				_, ok, err := e.s.Claim(e.ctx(), k, tok, hash("p"), ttl)
				if err != nil {
					errs[i] = err
					return
				}
				if !ok {
					errs[i] = once.ErrClaimLost
					return
				}
				errs[i] = e.s.Complete(e.ctx(), k, tok, []byte(fmt.Sprint("w", tok)), ttl)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: workers %d and %d both completed", round, winner+1, i+1)
			case err == nil:
				winner = i
			case !errors.Is(err, once.ErrClaimLost):
				t.Fatalf("round %d: worker %d: %v", round, i+1, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no worker completed", round)
		}
		e.want(k, once.Completed, uint64(winner+1), fmt.Sprint("w", winner+1))
	}
}

// Records survive a restart of the server; a record in progress is taken
// over by a newer token afterwards, a completed one still refuses.
func testRestart(t *testing.T, h Harness) {
	if h.Restart == nil {
		t.Skip("Harness.Restart is nil")
	}
	e := newEnv(t, h)
	done, running := e.key("done"), e.key("running")
	e.mustClaim(done, 5, hash("p"))
	if err := e.s.Complete(e.ctx(), done, 5, []byte("kept"), ttl); err != nil {
		t.Fatal(err)
	}
	e.mustClaim(running, 5, hash("p"))
	h.Restart(t)
	e.eventually("Get after restart", func() error {
		_, _, err := e.s.Get(e.ctx(), done)
		return err
	})
	e.want(done, once.Completed, 5, "kept")
	e.want(running, once.InProgress, 5, "")
	if err := e.s.Complete(e.ctx(), done, 5, []byte("kept"), ttl); err != nil {
		t.Fatalf("repeated Complete after restart: %v", err)
	}
	e.mustClaim(running, 6, hash("p"))
	if err := e.s.Complete(e.ctx(), running, 5, []byte("stale"), ttl); !errors.Is(err, once.ErrClaimLost) {
		t.Fatalf("stale Complete after restart: %v", err)
	}
}

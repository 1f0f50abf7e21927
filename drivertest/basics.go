package drivertest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// testCapabilities checks that the engine can work with what the driver
// reports: a positive TTL unit, a minimum TTL of at least one unit, a
// margin that leaves a minimal lease some validity, a positive batch size,
// and the same answer every time.
func testCapabilities(t *testing.T, h Harness) {
	d := h.New(t)
	if d == nil {
		t.Fatal("Harness.New returned nil")
	}
	defer d.Close()
	c := d.Capabilities()
	if c.TTLUnit <= 0 {
		t.Errorf("TTLUnit = %v, want > 0", c.TTLUnit)
	}
	if c.MinTTL < c.TTLUnit {
		t.Errorf("MinTTL = %v, want >= TTLUnit (%v)", c.MinTTL, c.TTLUnit)
	}
	if c.ExpiryMargin < 0 || c.ExpiryMargin >= c.MinTTL {
		t.Errorf("ExpiryMargin = %v, want in [0, MinTTL = %v)", c.ExpiryMargin, c.MinTTL)
	}
	if c.MaxBatch <= 0 {
		t.Errorf("MaxBatch = %d, want > 0", c.MaxBatch)
	}
	if c2 := d.Capabilities(); c2 != c {
		t.Errorf("Capabilities changed between calls: %+v, then %+v", c, c2)
	}
}

// testExclusion: a held lock is refused to every other ID, with a
// RetryAfter bounded by the TTL, and the refusals leave the holder alone.
func testExclusion(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	a := e.acquire(k, ttl)

	res := e.try(e.req(k, newID(), ttl))
	if res.Acquired {
		t.Fatalf("second Acquire by another ID: acquired (token %d) while held (token %d)", res.Token, a.token)
	}
	if res.RetryAfter <= 0 || res.RetryAfter > ttl {
		t.Errorf("waiting Acquire of a lock held for %v: RetryAfter = %v, want in (0, %v]", ttl, res.RetryAfter, ttl)
	}
	req := e.req(k, newID(), ttl)
	req.Waiting = false // RetryAfter may be left zero: not checked
	if res := e.try(req); res.Acquired {
		t.Errorf("non-waiting Acquire by another ID: acquired (token %d)", res.Token)
	}
	if !e.held(a, ttl) {
		t.Error("holder lost the lock to refused acquisitions")
	}
	// Another name is another lock.
	e.acquire(e.key("other"), ttl)
}

// testExclusionContended: of many concurrent acquisitions of a free lock
// exactly one wins, round after round, with increasing tokens.
func testExclusionContended(t *testing.T, h Harness) {
	e := newEnv(t, h)
	k := e.key("lock")
	ttl := e.ttl(longTTL)
	const rounds, contenders = 10, 8
	var last uint64
	for round := range rounds {
		ids := make([]string, contenders)
		results := make([]driver.AcquireResult, contenders)
		errs := make([]error, contenders)
		var wg sync.WaitGroup
		for i := range contenders {
			ids[i] = newID()
			wg.Go(func() { results[i], errs[i] = e.d.Acquire(e.ctx, e.req(k, ids[i], ttl)) })
		}
		wg.Wait()
		winner := -1
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("round %d: Acquire: %v", round, errs[i])
			}
			if !res.Acquired {
				continue
			}
			if winner >= 0 {
				t.Fatalf("round %d: two of %d concurrent acquisitions got the lock (tokens %d and %d)",
					round, contenders, results[winner].Token, res.Token)
			}
			winner = i
		}
		if winner < 0 {
			t.Fatalf("round %d: none of %d concurrent acquisitions of a free lock got it", round, contenders)
		}
		if tok := results[winner].Token; round > 0 && tok <= last {
			t.Errorf("round %d: token %d after %d, want increasing", round, tok, last)
		}
		last = results[winner].Token
		e.releaseOne(lease{k, ids[winner], last}, driver.Released)
	}
}

// testKeys: lock names with characters stores like to give a meaning to
// (separators, hash tags, glob characters, suffixes a driver might use for
// its own keys), Unicode, NUL, and dlock's longest name, are all separate
// locks unless the driver's KeyChecker rejects them.
func testKeys(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	kc, _ := e.d.(driver.KeyChecker)
	plain := e.key("plain-key_0")
	if kc != nil {
		if err := kc.CheckKey(plain); err != nil {
			t.Fatalf("CheckKey(%q) = %v, want nil for a plain name", plain, err)
		}
	}
	names := []string{
		plain,
		e.key("with space"),
		e.key("colon:sep:"),
		e.key("brace{tag}"),
		e.key("}{"),
		e.key(`glob*?[a]\`),
		e.key("ключ-🔒"),
		e.key("nul\x00byte"),
		e.key("x"), e.key("x:fence"), e.key("x:last"), e.key("x:released"), e.key("x}:last"),
	}
	if pad := maxKeyLen - len(e.key("")); pad > 0 {
		names = append(names, e.key(strings.Repeat("k", pad)))
	}
	var leases []lease
	for _, k := range names {
		if kc != nil {
			if err := kc.CheckKey(k); err != nil {
				if !errors.Is(err, driver.ErrInvalid) {
					t.Errorf("CheckKey(%q) = %v, want an error matching driver.ErrInvalid", k, err)
				}
				continue
			}
		}
		// Taken while all the others are held: no two names share a lock.
		leases = append(leases, e.acquire(k, ttl))
	}
	if in, ok := e.d.(driver.Inspector); ok {
		for _, l := range leases {
			info, ok, err := in.Inspect(e.ctx, l.key)
			if err != nil || !ok || info.Key != l.key || info.Token != l.token {
				t.Errorf("Inspect(%q) = key %q, token %d, ok %v, err %v; want the key, token %d",
					l.key, info.Key, info.Token, ok, err, l.token)
			}
		}
	}
	for _, l := range leases {
		e.releaseOne(l, driver.Released)
	}
}

// testKeyChecker: a KeyChecker accepts a plain name and rejects the
// harness's bad names with errors matching driver.ErrInvalid.
func testKeyChecker(t *testing.T, h Harness) {
	e := newEnv(t, h)
	kc, ok := e.d.(driver.KeyChecker)
	if !ok {
		if len(h.BadKeys) > 0 {
			t.Fatal("Harness.BadKeys is set but the driver does not implement driver.KeyChecker")
		}
		t.Skip("driver does not implement driver.KeyChecker")
	}
	plain := e.key("plain-key_0")
	if err := kc.CheckKey(plain); err != nil {
		t.Errorf("CheckKey(%q) = %v, want nil", plain, err)
	}
	for _, k := range h.BadKeys {
		if err := kc.CheckKey(k); err == nil {
			t.Errorf("CheckKey(%q) = nil, want an error matching driver.ErrInvalid", k)
		} else if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("CheckKey(%q) = %v, want an error matching driver.ErrInvalid", k, err)
		}
	}
}

// testContext: every call with a ctx that is already done fails, with
// ctx.Err() for a ContextAware driver, and the driver works afterwards.
func testContext(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	l := e.acquire(e.key("held"), ttl)
	w := e.watch(e.recorder())
	in, _ := e.d.(driver.Inspector)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"cancelled", cancelled}, {"past deadline", expired}} {
		check := func(op string, err error) {
			t.Helper()
			switch {
			case err == nil:
				t.Errorf("%s with a %s ctx: no error", op, c.name)
			case e.caps.ContextAware && !errors.Is(err, c.ctx.Err()):
				t.Errorf("%s with a %s ctx: %v, want an error matching %v (the driver is ContextAware)", op, c.name, err, c.ctx.Err())
			}
		}
		_, err := e.d.Acquire(c.ctx, e.req(e.key("other"), newID(), ttl))
		check("Acquire", err)
		_, err = e.d.Release(c.ctx, []driver.ReleaseRequest{{Key: l.key, ID: l.id}})
		check("Release", err)
		_, err = e.d.Renew(c.ctx, []driver.RenewRequest{{Key: l.key, ID: l.id, TTL: ttl}})
		check("Renew", err)
		check("Watcher.Add", w.Add(c.ctx, e.key("watched")))
		if in != nil {
			_, _, err = in.Inspect(c.ctx, l.key)
			check("Inspect", err)
			_, err = in.List(c.ctx, e.base)
			check("List", err)
			_, _, err = in.ForceRelease(c.ctx, e.key("free"))
			check("ForceRelease", err)
		}
	}
	// A call given up on must not leave the driver unusable.
	e.acquire(e.key("after"), ttl)
}

// testUnknownKind: Renew and Release refuse, with ErrInvalid, leases of a
// kind no driver implements, and leave the lock of the same key and ID
// alone.
func testUnknownKind(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ttl := e.ttl(longTTL)
	l := e.acquire(e.key("held"), ttl)
	bogus := driver.Kind(255)
	_, err := e.d.Renew(e.ctx, []driver.RenewRequest{{Kind: bogus, Key: l.key, ID: l.id, TTL: ttl}})
	if !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Renew of a %v lease: %v, want an error matching driver.ErrInvalid", bogus, err)
	}
	_, err = e.d.Release(e.ctx, []driver.ReleaseRequest{{Kind: bogus, Key: l.key, ID: l.id}})
	if !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Release of a %v lease: %v, want an error matching driver.ErrInvalid", bogus, err)
	}
	e.releaseOne(l, driver.Released)
}

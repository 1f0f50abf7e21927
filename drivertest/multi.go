package drivertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// The MultiAcquirer subtests. Their lock names start with a common hash
// tag, "{subtest}/name" (the Redis Cluster convention), so that a driver
// that takes keys atomically only within one shard can take them.

// multi returns the driver's MultiAcquirer and n lock names it can take
// atomically, or skips the subtest.
func (e *env) multi(n int) (driver.MultiAcquirer, []string) {
	e.t.Helper()
	ma, ok := e.d.(driver.MultiAcquirer)
	if !ok {
		e.t.Skip("driver does not implement driver.MultiAcquirer")
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("{%s}/%d", e.base, i)
	}
	if !ma.Atomic(keys) {
		e.t.Fatalf("Atomic(%q): false for names sharing a hash tag", keys)
	}
	return ma, keys
}

func (e *env) reqs(keys []string, ttl time.Duration) []driver.AcquireRequest {
	reqs := make([]driver.AcquireRequest, len(keys))
	for i, k := range keys {
		reqs[i] = e.req(k, newID(), ttl)
	}
	return reqs
}

func (e *env) acquireAll(ma driver.MultiAcquirer, reqs []driver.AcquireRequest) driver.AcquireAllResult {
	e.t.Helper()
	res, err := ma.AcquireAll(e.ctx, reqs)
	if err != nil {
		e.t.Fatalf("AcquireAll of %d: %v", len(reqs), err)
	}
	if res.Acquired && len(res.Tokens) != len(reqs) {
		e.t.Fatalf("AcquireAll of %d: acquired with %d tokens", len(reqs), len(res.Tokens))
	}
	return res
}

// testMultiAllOrNone: with one lock busy, AcquireAll takes none (the
// others stay free for anyone) and names the busy one; once it is free,
// AcquireAll takes all, each exclusively, with a token above every
// earlier token of its key, and each is renewed and released like a lock
// taken alone.
func testMultiAllOrNone(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ma, keys := e.multi(3)
	ttl := e.ttl(longTTL)
	var before []lease
	for _, k := range keys {
		before = append(before, e.acquire(k, ttl))
	}
	for _, l := range before[:2] {
		e.releaseOne(l, driver.Released)
	}
	busy := before[2]

	res := e.acquireAll(ma, e.reqs(keys, ttl))
	if res.Acquired {
		t.Fatalf("AcquireAll with %q held by another owner: acquired", busy.key)
	}
	if res.Busy != 2 {
		t.Errorf("Busy = %d, want 2 (the held lock)", res.Busy)
	}
	if res.RetryAfter <= 0 || res.RetryAfter > ttl {
		t.Errorf("RetryAfter = %v, want in (0, %v]", res.RetryAfter, ttl)
	}
	for _, k := range keys[:2] {
		l := e.acquire(k, ttl) // fails the subtest if a refused AcquireAll kept it
		e.releaseOne(l, driver.Released)
	}

	e.releaseOne(busy, driver.Released)
	reqs := e.reqs(keys, ttl)
	res = e.acquireAll(ma, reqs)
	if !res.Acquired {
		t.Fatalf("AcquireAll of free locks: not acquired (busy %d)", res.Busy)
	}
	for i, r := range reqs {
		if res.Tokens[i] <= before[i].token {
			t.Errorf("token of %q = %d, not above the earlier %d", r.Key, res.Tokens[i], before[i].token)
		}
		e.busy(r.Key)
		l := lease{r.Key, r.ID, res.Tokens[i]}
		if !e.held(l, ttl) {
			t.Errorf("renewal of %q taken by AcquireAll: not held", r.Key)
		}
		e.releaseOne(l, driver.Released)
	}
}

// testMultiRetry: AcquireAll repeated with the same IDs (a lost reply)
// answers the same tokens; repeated after one of its locks went to
// someone else, it answers busy and releases the rest of the earlier
// grant.
func testMultiRetry(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ma, keys := e.multi(3)
	ttl := e.ttl(longTTL)
	reqs := e.reqs(keys, ttl)
	first := e.acquireAll(ma, reqs)
	again := e.acquireAll(ma, reqs)
	if !first.Acquired || !again.Acquired {
		t.Fatalf("AcquireAll then its retry: acquired %v, %v", first.Acquired, again.Acquired)
	}
	for i := range reqs {
		if first.Tokens[i] != again.Tokens[i] {
			t.Errorf("retry: token of %q %d, first %d", reqs[i].Key, again.Tokens[i], first.Tokens[i])
		}
	}
	// Lock 1 changes hands; the retry must not leave locks 0 and 2 held.
	e.releaseOne(lease{reqs[1].Key, reqs[1].ID, 0}, driver.Released)
	stranger := e.acquire(reqs[1].Key, ttl)
	res := e.acquireAll(ma, reqs)
	if res.Acquired || res.Busy != 1 {
		t.Fatalf("retry after lock 1 changed hands: acquired %v, busy %d; want busy 1", res.Acquired, res.Busy)
	}
	for _, i := range []int{0, 2} {
		l := e.acquire(reqs[i].Key, ttl) // fails if the leftover is still held
		e.releaseOne(l, driver.Released)
	}
	e.releaseOne(stranger, driver.Released)
}

// testMultiContended: concurrent AcquireAll calls on overlapping key sets,
// named in different orders: at any time, the winners' sets are disjoint.
func testMultiContended(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ma, keys := e.multi(4)
	ttl := e.ttl(longTTL)
	sets := [][]string{
		{keys[0], keys[1]}, {keys[1], keys[0]}, {keys[1], keys[2]},
		{keys[3], keys[2], keys[0]}, {keys[2], keys[3]}, {keys[0], keys[3]},
	}
	const rounds = 10
	for range rounds {
		var wg sync.WaitGroup
		results := make([]driver.AcquireAllResult, len(sets))
		reqs := make([][]driver.AcquireRequest, len(sets))
		errs := make([]error, len(sets))
		for i, s := range sets {
			reqs[i] = e.reqs(s, ttl)
			wg.Go(func() { results[i], errs[i] = ma.AcquireAll(e.ctx, reqs[i]) })
		}
		wg.Wait()
		taken := map[string]int{}
		won := 0
		for i, res := range results {
			if errs[i] != nil {
				t.Fatalf("AcquireAll: %v", errs[i])
			}
			if !res.Acquired {
				continue
			}
			won++
			for _, k := range sets[i] {
				if j, dup := taken[k]; dup {
					t.Fatalf("%q granted to two concurrent AcquireAll calls (%d and %d)", k, j, i)
				}
				taken[k] = i
			}
		}
		if won == 0 {
			t.Fatal("no AcquireAll of a round won, all locks free")
		}
		for i, res := range results {
			if res.Acquired {
				for _, r := range reqs[i] {
					e.releaseOne(lease{r.Key, r.ID, 0}, driver.Released)
				}
			}
		}
	}
}

// testMultiInvalid: no locks, a key named twice, and keys Atomic refuses
// are invalid arguments, and take nothing.
func testMultiInvalid(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ma, keys := e.multi(2)
	ttl := e.ttl(longTTL)
	if _, err := ma.AcquireAll(e.ctx, nil); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("AcquireAll of nothing: %v, want ErrInvalid", err)
	}
	dup := e.reqs([]string{keys[0], keys[1], keys[0]}, ttl)
	if _, err := ma.AcquireAll(e.ctx, dup); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("AcquireAll naming %q twice: %v, want ErrInvalid", keys[0], err)
	}
	var spread []string
	for i := range 64 {
		spread = append(spread, e.key(fmt.Sprint(i)))
	}
	if !ma.Atomic(spread) {
		if _, err := ma.AcquireAll(e.ctx, e.reqs(spread, ttl)); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("AcquireAll of keys Atomic refuses: %v, want ErrInvalid", err)
		}
		spread = spread[:1]
	}
	for _, k := range append(keys, spread...) {
		e.releaseOne(e.acquire(k, ttl), driver.Released) // nothing was taken
	}
}

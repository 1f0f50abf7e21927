package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// oneByOne hides a driver's optional interfaces, MultiAcquirer among
// them: LockAll then takes the locks one by one, in sorted order.
type oneByOne struct{ driver.Driver }

// hammerLockAll runs workers goroutines, spread over the clients, each
// taking its keys cycles times with LockAll, every worker naming them in
// its own random order, all under one deadline. Inside, it checks that no
// key is held twice and that every key's tokens increase. A deadlock fails
// the test at the deadline.
func hammerLockAll(t *testing.T, clients []*dlock.Client, keys []string, workers, cycles int, within time.Duration) {
	t.Helper()
	ctx := leasecheck.Context(t, within)
	var mu sync.Mutex
	inUse := map[string]bool{}
	last := map[string]uint64{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := clients[w%len(clients)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range cycles {
				order := slices.Clone(keys)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				n := 2 + rng.IntN(len(order)-1) // at least two keys
				m, err := c.LockAll(ctx, order[:n], dlock.WithTTL(5*time.Second))
				if err != nil {
					errs <- fmt.Errorf("worker %d: LockAll(%q): %w", w, order[:n], err)
					return
				}
				mu.Lock()
				for k, tok := range m.Tokens() {
					if inUse[k] {
						errs <- fmt.Errorf("%q held by two MultiLeases at once", k)
					}
					if tok <= last[k] {
						errs <- fmt.Errorf("%q: token %d after %d", k, tok, last[k])
					}
					inUse[k], last[k] = true, tok
				}
				mu.Unlock()
				mu.Lock()
				for _, k := range m.Keys() {
					inUse[k] = false
				}
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("worker %d: Unlock: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Many goroutines on several Clients take overlapping key sets named in
// random orders: with the atomic step and with one-by-one acquisition,
// every one of them finishes (no deadlock) and no key is held twice.
func TestLockAllNoDeadlockMemdriver(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name string
		wrap func(driver.Driver) driver.Driver
	}{
		{"atomic", func(d driver.Driver) driver.Driver { return d }},
		{"one-by-one", func(d driver.Driver) driver.Driver { return oneByOne{d} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memdriver.New()
			var clients []*dlock.Client
			for range 4 {
				c, err := dlock.New(tc.wrap(store.Connect()), dlock.WithLogger(leasecheck.QuietLogger()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				clients = append(clients, c)
			}
			hammerLockAll(t, clients, keys, 32, 50, 60*time.Second)
		})
	}
}

// While LockAll waits for a busy key it holds nothing (atomic step), and
// the release of that key wakes it.
func TestLockAllWaitsHoldingNothing(t *testing.T) {
	store := memdriver.New()
	a, b := newMemLocker(t, store), newMemLocker(t, store.Connect())
	ctx := leasecheck.Context(t, 10*time.Second)
	busy, err := b.Lock(ctx, "k2")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.MultiLease, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := a.LockAll(ctx, []string{"k3", "k1", "k2"})
		if err != nil {
			errc <- err
			return
		}
		got <- m
	}()
	// Meanwhile k1 and k3 stay free for anyone.
	for _, k := range []string{"k1", "k3"} {
		l, err := b.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("%s while LockAll waits: %v", k, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := busy.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if !slices.Equal(m.Keys(), []string{"k1", "k2", "k3"}) || m.Token("k2") <= busy.Token() || m.Token("nope") != 0 {
			t.Fatalf("Keys %q, Tokens %v (k2 before: %d)", m.Keys(), m.Tokens(), busy.Token())
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("LockAll not woken by the release of the busy key")
	}
}

// One deadline for the whole acquisition, and the locks taken before it
// passed are released; TryLockAll releases them before it returns.
func TestLockAllRollsBack(t *testing.T) {
	store := memdriver.New()
	a := newMemLocker(t, oneByOne{store})
	b := newMemLocker(t, store.Connect())
	ctx := leasecheck.Context(t, 10*time.Second)
	busy, err := b.Lock(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"z", "y", "x"} // taken as x, y, then z waits
	if _, err := a.TryLockAll(ctx, keys); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLockAll with z busy: %v, want ErrNotAcquired", err)
	}
	checkFree(t, b, "x", "y")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := a.LockAll(short, keys); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockAll with z busy past the deadline: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("LockAll returned %v after a 100ms deadline", took)
	}
	// Its ctx has ended, so x and y are released in the background, and
	// their release wakes b at once (they were taken with a 30 s TTL).
	for _, k := range []string{"x", "y"} {
		quick, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := b.Lock(quick, k)
		cancel()
		if err != nil {
			t.Fatalf("%s after LockAll gave up: %v", k, err)
		}
		_ = l.Unlock(ctx)
	}
	if busy.Err() != nil {
		t.Fatal(busy.Err())
	}
}

// checkFree fails the test unless c can take each key at once.
func checkFree(t *testing.T, c *dlock.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		l, err := c.TryLock(context.Background(), k)
		if err != nil {
			t.Fatalf("%s: %v (left held by a failed LockAll?)", k, err)
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Losing one lock ends the MultiLease at once and releases the others;
// Unlock then reports ErrNotHeld.
func TestMultiLeaseLostReleasesTheRest(t *testing.T) {
	for _, name := range []string{"atomic", "one-by-one"} {
		t.Run(name, func(t *testing.T) {
			store := memdriver.New()
			var drv driver.Driver = store
			if name == "one-by-one" {
				drv = oneByOne{store}
			}
			a, err := dlock.New(drv, dlock.WithLogger(leasecheck.QuietLogger()))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b := newMemLocker(t, store.Connect())
			ctx := leasecheck.Context(t, 10*time.Second)
			const ttl = 3 * time.Second
			m, err := a.LockAll(ctx, []string{"p", "q"}, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := store.ForceRelease(ctx, "p"); !ok || err != nil {
				t.Fatal(ok, err)
			}
			select { // the renewal after TTL/3 finds p gone
			case <-m.Done():
			case <-ctx.Done():
				t.Fatal("MultiLease not ended by the loss of p")
			}
			if !errors.Is(m.Err(), dlock.ErrLockLost) || !errors.Is(context.Cause(m.Context()), dlock.ErrLockLost) || m.Context().Err() == nil {
				t.Fatalf("Err %v, cause %v", m.Err(), context.Cause(m.Context()))
			}
			// q is released, not left to its TTL (renewed at TTL/3 until p
			// was found lost, so it would be held about 2 s more).
			quick, cancel := context.WithTimeout(ctx, ttl/3)
			defer cancel()
			l, err := b.Lock(quick, "q")
			if err != nil {
				t.Fatalf("q after p was lost: %v", err)
			}
			_ = l.Unlock(ctx)
			for range 2 {
				if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
					t.Fatalf("Unlock of a lost MultiLease: %v, want ErrNotHeld", err)
				}
			}
		})
	}
}

// Bad input, re-entry, nesting under a MultiLease, idempotent Unlock,
// Close.
func TestLockAllAPI(t *testing.T) {
	c := newMemLocker(t, memdriver.New())
	ctx := leasecheck.Context(t, 10*time.Second)
	for _, keys := range [][]string{nil, {}, {"a", "b", "a"}, {"a", ""}} {
		if _, err := c.LockAll(ctx, keys); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("LockAll(%q): %v, want ErrInvalidArgument", keys, err)
		}
	}
	if _, err := c.TryLockAll(ctx, []string{"a"}, dlock.WithTTL(-1)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("TryLockAll with a bad TTL: %v", err)
	}
	m, err := c.LockAll(ctx, []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LockAll(m.Context(), []string{"a", "c"}); !errors.Is(err, dlock.ErrReentry) {
		t.Fatalf("LockAll under a MultiLease holding a: %v, want ErrReentry", err)
	}
	nested, err := c.Lock(m.Context(), "a")
	if err != nil || !nested.Nested() || nested.Token() != m.Token("a") || m.Holds() != 2 {
		t.Fatalf("Lock of a under the MultiLease: %v, nested %v, token %d vs %d", err, nested.Nested(), nested.Token(), m.Token("a"))
	}
	if m.Err() != nil || m.Deadline().IsZero() || m.TTL() != dlock.DefaultTTL {
		t.Fatalf("Err %v, Deadline %v, TTL %v", m.Err(), m.Deadline(), m.TTL())
	}
	for range 2 {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(nested.Err(), dlock.ErrReleased) || !errors.Is(m.Err(), dlock.ErrReleased) {
		t.Fatalf("after Unlock: nested %v, lease %v", nested.Err(), m.Err())
	}
	checkFree(t, c, "a", "b")

	m, err = c.LockAll(ctx, []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(m.Err(), dlock.ErrClosed) {
		t.Fatalf("after Close: %v", m.Err())
	}
	select {
	case <-m.Done():
	default:
		t.Fatal("Done open after Close")
	}
}

// One by one, a lock taken earlier that is lost while LockAll waits for a
// later one fails LockAll with ErrLockLost, and the rest is released.
func TestLockAllLostWhileWaiting(t *testing.T) {
	store := memdriver.New()
	a := newMemLocker(t, oneByOne{store})
	b := newMemLocker(t, store.Connect())
	ctx := leasecheck.Context(t, 10*time.Second)
	busy, err := b.Lock(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := a.LockAll(ctx, []string{"c", "a"}, dlock.WithTTL(300*time.Millisecond))
		got <- err
	}()
	for { // wait until LockAll holds a (and so waits for c)
		info, ok, err := store.Inspect(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if ok && info.Token > 0 {
			break
		}
		select {
		case <-time.After(time.Millisecond): // polling the store for the waiter's progress
		case <-ctx.Done():
			t.Fatal("LockAll never took a")
		}
	}
	if _, ok, err := store.ForceRelease(ctx, "a"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("LockAll after losing a while waiting for c: %v, want ErrLockLost", err)
		}
	case <-ctx.Done():
		t.Fatal("LockAll kept waiting after a was lost")
	}
	checkFree(t, b, "a")
	if busy.Err() != nil {
		t.Fatal(busy.Err())
	}
}

// A reply lost after the store granted every lock: LockAll reports the
// backend error, and what the store granted is released, not left to its
// TTL.
func TestLockAllLostReplyReleased(t *testing.T) {
	store := memdriver.New()
	a, b := newMemLocker(t, store), newMemLocker(t, store.Connect())
	ctx := leasecheck.Context(t, 10*time.Second)
	errLost := errors.New("reply lost")
	var once sync.Once
	store.SetFaultAfter(func(_ context.Context, op string) error {
		var err error
		if op == memdriver.OpAcquireAll {
			once.Do(func() { err = errLost })
		}
		return err
	})
	if _, err := a.LockAll(ctx, []string{"r", "s"}); !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, errLost) {
		t.Fatalf("LockAll with its reply lost: %v", err)
	}
	for _, k := range []string{"r", "s"} { // released in the background: b is woken
		quick, cancel := context.WithTimeout(ctx, 5*time.Second)
		l, err := b.Lock(quick, k)
		cancel()
		if err != nil {
			t.Fatalf("%s after a lost reply: %v (held for its 30 s TTL?)", k, err)
		}
		_ = l.Unlock(ctx)
	}
}

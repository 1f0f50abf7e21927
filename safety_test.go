package dlock_test

// Regression tests, against a real redis-server, for findings of the core
// review: a lease reporting itself held after a rival got the lock, and
// context deadlines ignored with the README's go-redis client.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// Fixed leases of 20 ms handed over between two clients, many keys at once
// to load the scheduler: whenever the rival holds the lock, the old lease's
// Err and Context().Err() must already report it lost. Done is closed by a
// goroutine, so it can only be as prompt as the scheduler; its lateness is
// logged, not asserted. A grant whose reply takes longer than the 16 ms
// validity (three times in a row: Lock retries) is refused, rightly; on a
// loaded machine that happens, so such a round is skipped and counted, and
// most rounds must still complete.
func TestHandOverNeverOverlapsReportedHolds(t *testing.T) {
	srv := redisserver.Start(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	const (
		keys   = 8
		rounds = 160
		ttl    = 20 * time.Millisecond
	)
	ctx := leasecheck.Context(t, 2*time.Minute)
	var (
		mu       sync.Mutex
		overlaps int
		done     int
		tooSlow  int
		lateDone time.Duration
		wg       sync.WaitGroup
	)
	errs := make(chan error, keys)
	for k := range keys {
		key := "handover-" + string(rune('a'+k))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				old, err := a.Lock(ctx, key, dlock.WithTTL(ttl), dlock.WithoutWatchdog())
				if slowGrant(err) {
					mu.Lock()
					tooSlow++
					mu.Unlock()
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				rival, err := b.Lock(ctx, key, dlock.WithTTL(ttl), dlock.WithoutWatchdog())
				if slowGrant(err) {
					mu.Lock()
					tooSlow++
					mu.Unlock()
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				// Done first: Err would close it.
				var late time.Duration
				select {
				case <-old.Done():
				default:
					late = time.Since(old.Deadline())
				}
				held := old.Context().Err() == nil || old.Err() == nil
				_ = rival.Unlock(ctx)
				mu.Lock()
				if held {
					overlaps++
				}
				done++
				lateDone = max(lateDone, late)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d hand-overs (%d rounds skipped: a grant too slow for the TTL); Done still open when the rival held the lock: at most %v past the deadline",
		done, tooSlow, lateDone)
	if overlaps > 0 {
		t.Fatalf("%d of %d hand-overs: the rival held the lock while the old lease reported itself held", overlaps, done)
	}
	if done < keys*rounds/2 {
		t.Fatalf("only %d of %d hand-overs completed (%d grants too slow): too few to judge", done, keys*rounds, tooSlow)
	}
}

// slowGrant reports whether err is Lock refusing a grant whose reply came
// after the lease's validity deadline.
func slowGrant(err error) bool {
	return errors.Is(err, dlock.ErrBackend) && strings.Contains(err.Error(), "after the lease's validity deadline")
}

// The README's client: no ContextTimeoutEnabled, so go-redis ignores
// context deadlines. Replies are delayed by 2 s; Lock and Unlock with a
// 200 ms context must still return at its end, and the acquisition that
// completes after Lock gave up must not leave the key held.
func TestContextHonouredWithoutContextTimeoutEnabled(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	c := leasecheck.NewLockerOn(t, redis.NewClient(&redis.Options{Addr: proxy.Addr()}), nil)
	// Warm the connection, then hold a lease to unlock later.
	l, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "held")
	if err != nil {
		t.Fatal(err)
	}
	// A lock someone else holds: Lock on it waits, and subscribes to its
	// release notifications on a new connection through the slow proxy.
	busy, err := leasecheck.NewLocker(t, srv.Addr()).TryLock(leasecheck.Context(t, 5*time.Second), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Unlock(context.Background())

	proxy.SetLatency(2 * time.Second)
	bounded := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s with a 200ms context took %v", what, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want context.DeadlineExceeded", what, err)
		}
	}
	bounded("Lock", func(ctx context.Context) error { _, err := c.Lock(ctx, "slow"); return err })
	bounded("Lock on a busy key", func(ctx context.Context) error { _, err := c.Lock(ctx, "busy"); return err })
	bounded("Unlock", func(ctx context.Context) error { return l.Unlock(ctx) })

	proxy.SetLatency(0)
	waitFreed(t, srv.Client(t), 15*time.Second, "slow", "held")
}

// A log handler that blocks must not freeze expiry. The first lost lease
// makes the Client log; with the handler stuck, a second fixed lease must
// still end at its deadline, before a rival can take the lock.
func TestBlockingLoggerDoesNotFreezeExpiry(t *testing.T) {
	srv := redisserver.Start(t)
	bh := probe.NewBlocking()
	defer close(bh.Release) // before the Clients close: they flush their logs
	a := leasecheck.NewLocker(t, srv.Addr(), dlock.WithLogger(slog.New(bh)))
	b := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const ttl = 100 * time.Millisecond
	first, err := a.TryLock(ctx, "first", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	leasecheck.WaitDone(t, first, 20*ttl) // lost at its deadline: a is now logging, stuck
	second, err := a.TryLock(ctx, "second", dlock.WithTTL(ttl), dlock.WithoutWatchdog())
	if err != nil {
		t.Fatal(err)
	}
	rival, err := b.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Unlock(ctx)
	if second.Err() == nil || second.Context().Err() == nil {
		t.Fatal("the rival holds the lock and the old lease still reports itself held")
	}
	select {
	case <-second.Done():
	case <-time.After(10 * ttl):
		t.Fatalf("Done still open %v after the rival took the lock", 10*ttl)
	}
}

// Lock on a busy key through a slow store: the first attempt answers busy
// within the context, then the subscription to release notifications is
// slow too. Lock must still return at ctx's end, not after the
// subscription and another attempt.
func TestLockOnBusyKeyHonoursContextWhileSubscribing(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	c := leasecheck.NewLocker(t, proxy.Addr())
	busy, err := leasecheck.NewLocker(t, srv.Addr()).TryLock(leasecheck.Context(t, 5*time.Second), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Unlock(context.Background())
	if _, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "busy"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("warm-up TryLock = %v, want ErrNotAcquired", err) // warms the connection and script cache
	}
	const latency, budget = time.Second, 2 * time.Second
	proxy.SetLatency(latency)
	defer proxy.SetLatency(0)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(ctx, "busy")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want context.DeadlineExceeded", err)
	}
	if took > budget+latency/2 {
		t.Fatalf("Lock with a %v context took %v", budget, took)
	}
}

package dlock_test

// Client against a real redis-server: acquisition, bad input, a store that
// is down or slow, Close, waiting for a release, and mutual exclusion under
// load.

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

func TestTryLockExcludesAndUnlockFrees(t *testing.T) {
	srv := redisserver.Start(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)

	la, err := a.TryLock(ctx, "order:42")
	if err != nil {
		t.Fatal(err)
	}
	if la.Key() != "order:42" || la.Err() != nil || la.Token() == 0 {
		t.Fatalf("fresh lease: key %q err %v token %d", la.Key(), la.Err(), la.Token())
	}
	if _, err := b.TryLock(ctx, "order:42"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: got %v, want ErrNotAcquired", err)
	}
	// Leases of one client exclude each other too.
	if _, err := a.TryLock(ctx, "order:42"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("same-client TryLock: got %v, want ErrNotAcquired", err)
	}
	pttl := srv.Client(t).PTTL(ctx, leasecheck.LockKey("order:42")).Val()
	if pttl <= 0 || pttl > dlock.DefaultTTL {
		t.Fatalf("lock key PTTL %v, want in (0, %v]", pttl, dlock.DefaultTTL)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
	if !errors.Is(la.Err(), dlock.ErrReleased) || !errors.Is(context.Cause(la.Context()), dlock.ErrReleased) {
		t.Fatalf("after Unlock: Err %v, cause %v", la.Err(), context.Cause(la.Context()))
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("second Unlock: %v, want nil (same answer)", err)
	}
	lb, err := b.TryLock(ctx, "order:42")
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("token did not increase: %d then %d", la.Token(), lb.Token())
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestOwnerMetadataIsStored(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr(), dlock.WithOwnerMeta("order-service v1"))
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := c.TryLock(ctx, "meta", dlock.WithMeta("batch 7"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	drv, _ := redisdriver.New(srv.Client(t))
	info, ok, err := drv.Inspect(ctx, "meta")
	if err != nil || !ok {
		t.Fatalf("inspect: ok %v err %v", ok, err)
	}
	if info.Token != l.Token() || info.Owner.Meta != "batch 7" || info.Owner.PID == 0 || info.Owner != l.Owner() {
		t.Fatalf("stored %+v, lease token %d owner %+v", info, l.Token(), l.Owner())
	}
	if info.TTL <= 0 || time.Since(info.Since) > time.Minute || time.Since(info.Since) < -time.Minute {
		t.Fatalf("implausible ttl %v since %v", info.TTL, info.Since)
	}
}

func TestInvalidInput(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	cases := []struct {
		name string
		key  string
		opts []dlock.LockOption
		want error
	}{
		{"empty key", "", nil, dlock.ErrInvalidKey},
		{"huge key", strings.Repeat("k", dlock.MaxKeyLen+1), nil, dlock.ErrInvalidKey},
		{"leading brace", "}x", nil, dlock.ErrInvalidKey},
		{"tiny ttl", "k", []dlock.LockOption{dlock.WithTTL(time.Millisecond)}, dlock.ErrInvalidTTL},
		{"negative ttl", "k", []dlock.LockOption{dlock.WithTTL(-time.Second)}, dlock.ErrInvalidTTL},
		// "Forever": rounded up to whole milliseconds it would wrap to a
		// negative TTL, which the driver refused as a mere bad argument.
		{"ttl that cannot be rounded", "k", []dlock.LockOption{dlock.WithTTL(math.MaxInt64)}, dlock.ErrInvalidTTL},
		{"fair ttl that cannot be rounded", "k", []dlock.LockOption{dlock.WithTTL(math.MaxInt64), dlock.WithFIFO()}, dlock.ErrInvalidTTL},
		{"nil option", "k", []dlock.LockOption{nil}, dlock.ErrInvalidArgument},
		{"huge meta", "k", []dlock.LockOption{dlock.WithMeta(strings.Repeat("m", dlock.MaxMetaLen+1))}, dlock.ErrInvalidArgument},
	}
	for _, tc := range cases {
		for _, call := range []func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error){c.TryLock, c.Lock} {
			l, err := call(ctx, tc.key, tc.opts...)
			if l != nil || !errors.Is(err, tc.want) || !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Errorf("%s: lease %v err %v, want %v", tc.name, l, err, tc.want)
			}
		}
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if _, err := c.TryLock(nil, "k"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	if _, err := dlock.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil driver: %v", err)
	}
	if _, err := redisdriver.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil redis client: %v, want dlock.ErrInvalidArgument", err)
	}
	if _, err := dlock.New(mustDriver(t, srv), dlock.WithDefaultTTL(0)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("zero default ttl: %v", err)
	}
	if _, err := dlock.New(mustDriver(t, srv), dlock.WithDefaultTTL(math.MaxInt64)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("default ttl that cannot be rounded: %v", err)
	}
	if _, err := c.TryLockAll(ctx, []string{"a", "b"}, dlock.WithTTL(math.MaxInt64)); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Errorf("multi-lock ttl that cannot be rounded: %v", err)
	}
	if n := srv.Client(t).DBSize(ctx).Val(); n != 0 {
		t.Errorf("invalid calls wrote %d keys", n)
	}
	// The longest TTL that rounds still works.
	long, err := c.TryLock(ctx, "long", dlock.WithTTL(math.MaxInt64/time.Millisecond*time.Millisecond))
	if err != nil {
		t.Fatalf("the longest TTL: %v", err)
	}
	if err := long.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func mustDriver(t testing.TB, srv *redisserver.Server) *redisdriver.Driver {
	d, err := redisdriver.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBackendDownIsTypedAndFast(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	srv.Kill()
	ctx := leasecheck.Context(t, 30*time.Second)
	for name, call := range map[string]func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error){"TryLock": c.TryLock, "Lock": c.Lock} {
		_, err := call(ctx, "down")
		if !errors.Is(err, dlock.ErrBackend) || errors.Is(err, dlock.ErrNotAcquired) || ctx.Err() != nil {
			t.Errorf("%s with Redis down: %v, want ErrBackend", name, err)
		}
	}
}

// Close against a real redis-server: the leases and waiters it ends, and
// what it leaves behind when the store is slow or a call is in flight.

func TestCloseReleasesLeasesAndStopsWaiters(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := a.Lock(ctx, "closing")
	if err != nil {
		t.Fatal(err)
	}
	held, err := b.Lock(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { _, err := b.Lock(ctx, "closing"); waitErr <- err }()

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), dlock.ErrClosed) {
		t.Fatalf("lease after Close: %v", l.Err())
	}
	if _, err := a.TryLock(ctx, "x"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock after Close: %v", err)
	}
	// Close released the lock, so the waiter in b gets it.
	if err := <-waitErr; err != nil {
		t.Fatalf("waiter after holder closed: %v", err)
	}
	// Closing b ends its waiting and held leases and deletes their keys.
	go func() { _, err := b.Lock(ctx, "other"); waitErr <- err }()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waitErr; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiting Lock after Close: %v", err)
	}
	if !errors.Is(held.Err(), dlock.ErrClosed) {
		t.Fatalf("held lease after Close: %v", held.Err())
	}
	if leasecheck.IsHeld(t, rdb, "closing") || leasecheck.IsHeld(t, rdb, "other") {
		t.Fatal("locks still held after Close")
	}
}

// newProxiedLocker returns a Client whose go-redis client reaches srv
// through a fault-injecting proxy; the go-redis client is returned so the
// test can close it after the Client, as an application does.
func newProxiedLocker(t *testing.T, srv *redisserver.Server) (*dlock.Client, *redis.Client, *redisserver.Proxy) {
	t.Helper()
	proxy := redisserver.NewProxy(t, srv.Addr())
	rdb := redisserver.NewClient(t, proxy.Addr())
	return leasecheck.NewLockerOn(t, rdb, nil), rdb, proxy
}

// Close must end leases at once, not after a renewal in flight against a
// slow store has returned: until then a rival may already hold the lock.
func TestCloseEndsLeasesWhileARenewalIsStuck(t *testing.T) {
	srv := redisserver.Start(t)
	c, _, proxy := newProxiedLocker(t, srv)
	const ttl = 900 * time.Millisecond
	l, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "stuck", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(time.Hour)
	time.Sleep(ttl/3 + 50*time.Millisecond) // let the renewal at TTL/3 go out and hang
	start := time.Now()
	go func() { _ = c.Close() }()
	for l.Err() == nil {
		if time.Since(start) > ttl/3 {
			t.Fatalf("lease still held %v after Close began, with a renewal stuck", time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(l.Err(), dlock.ErrClosed) {
		t.Fatalf("Err() = %v, want ErrClosed", l.Err())
	}
	proxy.SetLatency(0)
}

// An acquisition in flight when Close is called, then the application
// closes its go-redis client: the key must not stay held by nobody.
func TestCloseLeavesNoOrphanedAcquisition(t *testing.T) {
	srv := redisserver.Start(t)
	c, rdb, proxy := newProxiedLocker(t, srv)
	if _, err := c.TryLock(leasecheck.Context(t, 5*time.Second), "warm", dlock.WithTTL(time.Minute)); err != nil {
		t.Fatal(err) // warms the connection and the script cache
	}
	proxy.SetLatency(300 * time.Millisecond)
	locked := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), "orphan", dlock.WithTTL(time.Minute))
		locked <- err
	}()
	time.Sleep(100 * time.Millisecond) // the acquire request is on its way
	_ = c.Close()
	_ = rdb.Close()
	if err := <-locked; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock = %v, want ErrClosed", err)
	}
	direct := srv.Client(t)
	if leasecheck.IsHeld(t, direct, "orphan") {
		t.Fatalf("the key is held by nobody after Close (PTTL %v)", direct.PTTL(context.Background(), leasecheck.LockKey("orphan")).Val())
	}
}

// Close with many leases releases them in batches, not one goroutine each.
func TestCloseWithManyLeasesIsBatched(t *testing.T) {
	srv := redisserver.Start(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	const n = 5000
	ctx := leasecheck.Context(t, time.Minute)
	for i := range n {
		if _, err := c.TryLock(ctx, "many-"+strconv.Itoa(i), dlock.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var closeErr error
	before, peak := probe.PeakGoroutines(func() { closeErr = c.Close() })
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	if peak > before+20 {
		t.Fatalf("Close with %d leases peaked at %d goroutines (%d before)", n, peak, before)
	}
	if keys := srv.Client(t).DBSize(ctx).Val(); keys != 0 {
		// Released locks become ':last' values; only those may remain.
		left, _ := srv.Client(t).Keys(ctx, "dlock:{many-*}").Result()
		if len(left) > 0 {
			t.Fatalf("%d lock keys left after Close, e.g. %v", len(left), left[0])
		}
	}
}

// The Locks and Unlocks that a Client's goroutines make while one is in
// flight go to the store together, in the next call: 16 of each at once
// over a slow link take fewer round trips than 16, and every one does
// what it would alone (a lease with its own token; then nil, and the name
// free for another Client).
func TestConcurrentCallsShareARoundTrip(t *testing.T) {
	srv := redisserver.Start(t)
	admin := redisserver.NewClient(t, srv.Addr())
	proxy := redisserver.NewProxy(t, srv.Addr())
	rdb := redisserver.NewClient(t, proxy.Addr())
	var trips tripCounter
	rdb.AddHook(&trips)
	c := leasecheck.NewLockerOn(t, rdb, nil)
	other := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	warm, err := c.Lock(ctx, "warm-up") // dials, and caches the scripts
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 16
	proxy.SetLatency(50 * time.Millisecond) // the first call is in flight while the others come
	concurrently := func(what string, f func(i int) error) {
		t.Helper()
		before := trips.n.Load()
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { errs[i] = f(i) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
		}
		sent := trips.n.Load() - before
		t.Logf("%d concurrent %ss: %d round trips", n, what, sent)
		if sent >= n {
			t.Errorf("%d concurrent %ss took %d round trips, want fewer: none went together", n, what, sent)
		}
	}
	leases := make([]*dlock.Lease, n)
	concurrently("Lock", func(i int) (err error) {
		leases[i], err = c.Lock(ctx, "batch-"+strconv.Itoa(i))
		return err
	})
	for i, l := range leases {
		if l.Token() == 0 || l.Key() != "batch-"+strconv.Itoa(i) {
			t.Errorf("lease %d: key %q, token %d", i, l.Key(), l.Token())
		}
		if _, err := other.TryLock(ctx, l.Key()); err == nil {
			t.Errorf("%s: another Client took it while it was held", l.Key())
		}
	}
	before := commandCalls(t, admin)
	concurrently("Unlock", func(i int) error { return leases[i].Unlock(ctx) })
	t.Logf("%d concurrent Unlocks: %d script calls", n, commandCalls(t, admin)["evalsha"]-before["evalsha"])
	for i := range leases {
		l, err := other.TryLock(ctx, "batch-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("batch-%d after its Unlock: %v", i, err)
		}
		_ = l.Unlock(context.Background())
	}
}

// countingDriver counts acquisition attempts and reports each one.
type countingDriver struct {
	driver.Driver
	attempts atomic.Int64
	seen     chan struct{}
}

func (d *countingDriver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	d.attempts.Add(1)
	select {
	case d.seen <- struct{}{}:
	default:
	}
	return d.Driver.Acquire(ctx, req)
}

func newCountingLocker(t *testing.T, addr string) (*dlock.Client, *countingDriver) {
	t.Helper()
	var cd *countingDriver
	c := leasecheck.NewLockerOn(t, redisserver.NewClient(t, addr), func(d driver.Driver) driver.Driver {
		cd = &countingDriver{Driver: d, seen: make(chan struct{}, 1024)}
		return cd
	})
	return c, cd
}

// A waiter must learn of a release by notification: with a 30 s TTL the
// fallback timer would not fire within the test's 10 s.
func TestWaiterWokenByReleaseNotification(t *testing.T) {
	srv := redisserver.Start(t)
	holder := leasecheck.NewLocker(t, srv.Addr())
	waiter, counter := newCountingLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	l, err := holder.Lock(ctx, "notify", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "notify", dlock.WithTTL(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	// Two attempts mean the waiter has subscribed and is now asleep.
	<-counter.seen
	<-counter.seen
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.Fatal("waiter did not get the lock")
	}
	t.Logf("handoff after release: %v", time.Since(start))
	if l2.Token() <= l.Token() {
		t.Fatalf("tokens %d then %d", l.Token(), l2.Token())
	}
	_ = l2.Unlock(ctx)
}

// Many goroutines of one client waiting for one key cost one attempt per
// release, not one per waiter: only the first in line is woken.
func TestLocalWaitersDoNotStampede(t *testing.T) {
	srv := redisserver.Start(t)
	holder := leasecheck.NewLocker(t, srv.Addr())
	waiters, counter := newCountingLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	const n = 10
	l, err := holder.Lock(ctx, "herd", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiters.Lock(ctx, "herd", dlock.WithTTL(30*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			_ = l.Unlock(ctx)
		}()
	}
	// Every waiter makes two attempts before it sleeps.
	for range 2 * n {
		<-counter.seen
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// 2 per waiter to start, then about one per handoff; a stampede would
	// be n per handoff (~n²/2 in all).
	extra := counter.attempts.Load() - 2*n
	t.Logf("attempts after the first release: %d for %d waiters", extra, n)
	if extra > 2*n {
		t.Fatalf("%d attempts for %d handoffs: waiters stampede", extra, n)
	}
}

// Regression tests for findings of the core review: context deadlines
// ignored with the README's go-redis client.

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

// Many workers, each with its own connection and Client, fight for one key
// with critical sections that often outlast the TTL. The watchdog must keep
// every holder's lock alive, nobody may enter while another is inside, and
// tokens must increase in the order workers entered. Both ways of
// waiting: the store's queue (Lock's default on Redis) and the plain one.
func TestStressMutualExclusion(t *testing.T) {
	t.Run("fifo", func(t *testing.T) { stressMutualExclusion(t) })
	t.Run("plain", func(t *testing.T) { stressMutualExclusion(t, dlock.WithoutFIFO()) })
}

func stressMutualExclusion(t *testing.T, opts ...dlock.LockOption) {
	srv := redisserver.Start(t)
	const (
		workers = 8
		rounds  = 8
		// Long enough that a renewal delayed by a loaded CI machine under
		// -race still lands inside the validity window.
		ttl = 250 * time.Millisecond
	)
	ctx := leasecheck.Context(t, 2*time.Minute)

	var (
		overlaps atomic.Int32
		losses   atomic.Int32 // leases that ended at their deadline while working
		mu       sync.Mutex
		inside   = map[*dlock.Lease]bool{} // guarded by mu
		entries  []uint64                  // tokens in the order holders got inside
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	for w := range workers {
		c := leasecheck.NewLocker(t, srv.Addr())
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				l, err := c.Lock(ctx, "stress", append([]dlock.LockOption{dlock.WithTTL(ttl)}, opts...)...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				// Another holder still inside is an overlap only if its
				// lease still says it is held: Err reads the clock itself,
				// while its Done may be closed late on a starved machine.
				for other := range inside {
					if other.Err() == nil {
						overlaps.Add(1)
					}
				}
				inside[l] = true
				entries = append(entries, l.Token())
				mu.Unlock()
				// A third of the sections last longer than the TTL.
				work := time.Duration(rng.IntN(int(2 * ttl)))
				lost := false
				select {
				case <-time.After(work):
				case <-l.Done():
					// A process starved of CPU is a paused one: its lease
					// may end before its renewal gets to run. That is the
					// lease doing its job, not a failure; what must hold
					// is that no one else got in while it said held.
					lost = errors.Is(l.Err(), dlock.ErrLockLost)
					if !lost {
						errs <- l.Err()
						return
					}
					losses.Add(1)
				}
				mu.Lock()
				delete(inside, l)
				mu.Unlock()
				if err := l.Unlock(context.Background()); err != nil && !(lost && errors.Is(err, dlock.ErrNotHeld)) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("worker: %v", err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if len(entries) != workers*rounds {
		t.Fatalf("%d entries, want %d", len(entries), workers*rounds)
	}
	if n := losses.Load(); n > 0 {
		t.Logf("%d of %d leases ended at their deadline while their holder worked (a starved machine)", n, len(entries))
	}
	for i := 1; i < len(entries); i++ {
		if entries[i] <= entries[i-1] {
			t.Fatalf("entry %d has token %d after %d", i, entries[i], entries[i-1])
		}
	}
}

// BenchmarkLockUnlock measures one TryLock+Unlock cycle on an uncontended
// key: two round trips to a loopback redis-server.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redisserver.Start(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.TryLock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel runs cycles on distinct keys from
// GOMAXPROCS×4 goroutines sharing one Client (and its connection pool).
func BenchmarkLockUnlockParallel(b *testing.B) {
	srv := redisserver.Start(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		key := "bench:" + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() && cycle(b, c.TryLock, key) {
		}
	})
}

// BenchmarkLockContended has goroutines with a Client each (separate
// processes, in effect) Lock one key, so each cycle includes a wake-up by
// release notification.
func BenchmarkLockContended(b *testing.B) {
	srv := redisserver.Start(b)
	lockers := make([]*dlock.Client, 2*runtime.GOMAXPROCS(0))
	for i := range lockers {
		lockers[i] = leasecheck.NewLocker(b, srv.Addr())
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		c := lockers[next.Add(1)-1]
		for pb.Next() && cycle(b, c.Lock, "contended") {
		}
	})
}

// cycle takes and releases key once, reporting false on failure.
func cycle(b *testing.B, lock func(context.Context, string, ...dlock.LockOption) (*dlock.Lease, error), key string) bool {
	ctx := context.Background()
	l, err := lock(ctx, key)
	if err == nil {
		err = l.Unlock(ctx)
	}
	if err != nil {
		b.Error(err)
		return false
	}
	return true
}

// BenchmarkRawFloor is the floor BenchmarkLockUnlock is compared with: a
// bare SET NX PX and a compare-and-delete script, nothing else.
func BenchmarkRawFloor(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := redisserver.NewClient(b, srv.Addr())
	ctx := context.Background()
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := rdb.SetNX(ctx, "raw", "me", dlock.DefaultTTL).Result(); err != nil || !ok {
			b.Fatal(ok, err)
		}
		if err := del.Run(ctx, rdb, []string{"raw"}, "me").Err(); err != nil {
			b.Fatal(err)
		}
	}
}

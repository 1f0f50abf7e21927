package dlock_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
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

func TestLockCancelledReturnsContextError(t *testing.T) {
	srv := redisserver.Start(t)
	a, b := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	l, err := a.Lock(leasecheck.Context(t, 5*time.Second), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx, "busy")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

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

// Unlock whose reply is lost (the release ran in Redis, the client timed
// out) must answer nil when retried — not ErrNotHeld.
func TestUnlockRetryAfterLostReply(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	c := leasecheck.NewLocker(t, proxy.Addr())
	ctx := leasecheck.Context(t, 20*time.Second)
	// Load the library first, so the delayed reply below is the release's
	// own and not a "not found" that stops the release from being sent.
	warm, err := c.TryLock(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Unlock(ctx)
	l, err := c.TryLock(ctx, "lost-reply")
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(time.Second) // requests arrive, replies are late
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = l.Unlock(short)
	cancel()
	if err == nil {
		t.Fatal("Unlock succeeded despite the delayed reply")
	}
	if leasecheck.IsHeld(t, srv.Client(t), "lost-reply") {
		t.Fatal("the release did not reach Redis: the scenario did not happen")
	}
	proxy.SetLatency(0)
	// Later holders, of this Client (whose releases tell the store which
	// earlier release needs no record: not this one, still unanswered) and
	// of another, take and release the name before the retry.
	other := leasecheck.NewLocker(t, srv.Addr())
	for _, holder := range []*dlock.Client{c, other, c} {
		next, err := holder.Lock(ctx, "lost-reply")
		if err != nil {
			t.Fatal(err)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock: %v, want nil", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("third Unlock: %v, want nil", err)
	}
}

// A Client that locks a name again and again leaves no record of its
// releases behind: each release it had the answer to needs none for a
// retry (driver.ReleaseRequest.Settled), so only the last release's value
// stays, under :last, for the TTL it had left.
func TestRepeatedLocksLeaveNoReleaseRecords(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	for range 50 {
		l, err := c.Lock(ctx, "again")
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{leasecheck.LockKey("again") + ":last"}; !slices.Equal(keys, want) {
		t.Errorf("after 50 cycles of one Client the store holds %q, want %q", keys, want)
	}
}

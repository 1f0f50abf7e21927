package memdriver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

// clock is a fake clock moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fixture is a driver on a fake clock with helpers that fail the test on
// errors.
type fixture struct {
	t   *testing.T
	c   *clock
	d   *memdriver.Driver
	ctx context.Context
}

func newFixture(t *testing.T, opts ...memdriver.Option) *fixture {
	c := newClock()
	d := memdriver.New(append([]memdriver.Option{memdriver.WithClock(c.Now)}, opts...)...)
	t.Cleanup(func() { d.Close() })
	return &fixture{t: t, c: c, d: d, ctx: t.Context()}
}

func (f *fixture) acquire(key, id string, ttl time.Duration) driver.AcquireResult {
	f.t.Helper()
	res, err := f.d.Acquire(f.ctx, driver.AcquireRequest{Key: key, ID: id, TTL: ttl, Waiting: true})
	if err != nil {
		f.t.Fatalf("Acquire(%q, %q): %v", key, id, err)
	}
	return res
}

func (f *fixture) release(key, id string) driver.ReleaseResult {
	f.t.Helper()
	res, err := f.d.Release(f.ctx, []driver.ReleaseRequest{{Key: key, ID: id}})
	if err != nil {
		f.t.Fatalf("Release(%q, %q): %v", key, id, err)
	}
	return res[0]
}

func (f *fixture) renew(key, id string, ttl time.Duration) bool {
	f.t.Helper()
	held, err := f.d.Renew(f.ctx, []driver.RenewRequest{{Key: key, ID: id, TTL: ttl}})
	if err != nil {
		f.t.Fatalf("Renew(%q, %q): %v", key, id, err)
	}
	return held[0]
}

func TestExpiryAtTheInstant(t *testing.T) {
	f := newFixture(t)
	a := f.acquire("k", "a", 10*time.Second)
	f.c.Advance(10*time.Second - time.Nanosecond)
	if res := f.acquire("k", "b", time.Second); res.Acquired || res.RetryAfter != time.Nanosecond {
		t.Fatalf("1ns before expiry: %+v, want busy with RetryAfter 1ns", res)
	}
	f.c.Advance(time.Nanosecond)
	b := f.acquire("k", "b", time.Second)
	if !b.Acquired || b.Token <= a.Token {
		t.Fatalf("at the expiry instant: %+v, want acquired with a token above %d", b, a.Token)
	}
	if got := f.release("k", "a"); got != driver.NotHeld {
		t.Errorf("release by the expired holder = %v, want NotHeld", got)
	}
}

func TestRetriedAcquireKeepsTTL(t *testing.T) {
	f := newFixture(t)
	first := f.acquire("k", "a", 10*time.Second)
	f.c.Advance(6 * time.Second)
	again := f.acquire("k", "a", 10*time.Second)
	if again != first {
		t.Fatalf("retried Acquire = %+v, want %+v", again, first)
	}
	f.c.Advance(4 * time.Second) // 10 s after the first try: expired
	if res := f.acquire("k", "b", time.Second); !res.Acquired {
		t.Fatalf("a retried Acquire extended the lock: %+v", res)
	}
}

func TestReleaseRememberedForRemainingTTL(t *testing.T) {
	f := newFixture(t)
	f.acquire("k", "a", 10*time.Second)
	f.c.Advance(4 * time.Second)
	if got := f.release("k", "a"); got != driver.Released {
		t.Fatalf("release = %v, want Released", got)
	}
	// Someone else's lock in between does not make the retry a stranger's.
	f.acquire("k", "b", time.Second)
	f.c.Advance(6*time.Second - time.Nanosecond)
	if got := f.release("k", "a"); got != driver.AlreadyReleased {
		t.Errorf("retry within the released lock's TTL = %v, want AlreadyReleased", got)
	}
	f.c.Advance(time.Nanosecond)
	if got := f.release("k", "a"); got != driver.NotHeld {
		t.Errorf("retry after the released lock's TTL = %v, want NotHeld", got)
	}
}

func TestRenewFromNow(t *testing.T) {
	f := newFixture(t)
	f.acquire("k", "a", 10*time.Second)
	f.c.Advance(9 * time.Second)
	if !f.renew("k", "a", 3*time.Second) {
		t.Fatal("renewal of a held lock: false")
	}
	info, ok, err := f.d.Inspect(f.ctx, "k")
	if err != nil || !ok || info.TTL != 3*time.Second {
		t.Fatalf("Inspect after renewal: %+v, %v, %v; want TTL 3s", info, ok, err)
	}
	f.c.Advance(3 * time.Second)
	if f.renew("k", "a", 3*time.Second) {
		t.Fatal("renewal of an expired lock: true")
	}
}

func TestTokensAcrossKeysAndRestarts(t *testing.T) {
	f := newFixture(t)
	var last uint64
	next := func(key, id string) {
		t.Helper()
		res := f.acquire(key, id, time.Second)
		if !res.Acquired || res.Token <= last {
			t.Fatalf("Acquire(%q): %+v, want acquired with a token above %d", key, res, last)
		}
		last = res.Token
	}
	next("a", "1")
	snap := f.d.Snapshot()
	next("b", "2")
	f.d.Restart(nil)
	next("a", "3") // free: the restart lost it
	f.d.Restart(snap)
	if res := f.acquire("a", "4", time.Second); res.Acquired {
		t.Fatal("the snapshot's lock on a did not come back")
	}
	next("b", "5") // taken after the snapshot: gone
	f.c.Advance(time.Second)
	next("a", "6") // the restored lock keeps its original expiry
}

func TestConnectAndClose(t *testing.T) {
	f := newFixture(t)
	other := f.d.Connect()
	got := make(chan string, 1)
	w, err := other.Watch(func(key string) { got <- key })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	f.acquire("k", "a", time.Second)
	if res, _ := other.Acquire(f.ctx, driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second}); res.Acquired {
		t.Fatal("a second handle does not share the store")
	}
	f.release("k", "a")
	<-got // the other handle's watcher heard the release

	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(f.ctx, "x"); !errors.Is(err, memdriver.ErrClosed) {
		t.Errorf("Watcher.Add after Driver.Close: %v, want ErrClosed", err)
	}
	if _, err := other.Acquire(f.ctx, driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second}); !errors.Is(err, memdriver.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if _, err := other.Watch(func(string) {}); !errors.Is(err, memdriver.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
	if res := f.acquire("k", "b", time.Second); !res.Acquired {
		t.Error("closing one handle broke the store for the other")
	}
}

func TestInvalidArguments(t *testing.T) {
	f := newFixture(t, memdriver.WithCapabilities(driver.Capabilities{
		TTLUnit: time.Millisecond, MinTTL: 10 * time.Millisecond, MaxBatch: 2, ContextAware: true,
	}))
	ctx := f.ctx
	ok := driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second}
	bad := map[string]func() error{
		"empty key":    func() error { r := ok; r.Key = ""; _, err := f.d.Acquire(ctx, r); return err },
		"empty id":     func() error { r := ok; r.ID = ""; _, err := f.d.Acquire(ctx, r); return err },
		"ttl below":    func() error { r := ok; r.TTL = 9 * time.Millisecond; _, err := f.d.Acquire(ctx, r); return err },
		"ttl fraction": func() error { r := ok; r.TTL = 10*time.Millisecond + 1; _, err := f.d.Acquire(ctx, r); return err },
		"release batch": func() error {
			reqs := make([]driver.ReleaseRequest, 3)
			for i := range reqs {
				reqs[i] = driver.ReleaseRequest{Key: "k", ID: "a"}
			}
			_, err := f.d.Release(ctx, reqs)
			return err
		},
		"renew batch": func() error {
			reqs := make([]driver.RenewRequest, 3)
			for i := range reqs {
				reqs[i] = driver.RenewRequest{Key: "k", ID: "a", TTL: time.Second}
			}
			_, err := f.d.Renew(ctx, reqs)
			return err
		},
		"renew ttl":  func() error { _, err := f.d.Renew(ctx, []driver.RenewRequest{{Key: "a", ID: "a"}}); return err },
		"nil watch":  func() error { _, err := f.d.Watch(nil); return err },
		"inspect":    func() error { _, _, err := f.d.Inspect(ctx, ""); return err },
		"force":      func() error { _, _, err := f.d.ForceRelease(ctx, ""); return err },
		"release id": func() error { _, err := f.d.Release(ctx, []driver.ReleaseRequest{{Key: "k"}}); return err },
	}
	for name, call := range bad {
		if err := call(); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, want an error matching driver.ErrInvalid", name, err)
		}
	}
}

func TestExpiryMargin(t *testing.T) {
	f := newFixture(t, memdriver.WithCapabilities(driver.Capabilities{
		TTLUnit: time.Millisecond, MinTTL: 10 * time.Millisecond, ExpiryMargin: 5 * time.Millisecond, MaxBatch: 10,
	}))
	f.acquire("k", "a", time.Second)
	f.c.Advance(time.Second - 5*time.Millisecond)
	if res := f.acquire("k", "b", time.Second); !res.Acquired {
		t.Fatalf("lock not expired ExpiryMargin early: %+v", res)
	}
}

func TestUnusableCapabilitiesAreRefused(t *testing.T) {
	d := memdriver.New(memdriver.WithCapabilities(driver.Capabilities{TTLUnit: 1, MinTTL: 1}))
	_, err := d.Acquire(context.Background(), driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
	if !errors.Is(err, driver.ErrInvalid) {
		t.Fatalf("Acquire on a driver with MaxBatch 0: %v, want driver.ErrInvalid", err)
	}
}

// Close closes the grant watchers the Driver made: their goroutines are
// gone (TestMain's goleak check fails otherwise), and later grants reach
// nobody.
func TestCloseClosesGrantWatchers(t *testing.T) {
	d := memdriver.New()
	if _, err := d.WatchGrants(context.Background(), "inbox", func(driver.Grant) {}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WatchGrants(context.Background(), "inbox", func(driver.Grant) {}); !errors.Is(err, memdriver.ErrClosed) {
		t.Fatalf("WatchGrants after Close: %v, want ErrClosed", err)
	}
}

// A restart from a snapshot taken after a permit's release keeps the
// release on record, as it keeps the plain lock's: a retry of that release
// is AlreadyReleased, not NotHeld.
func TestRestartFromSnapshotKeepsQueuedReleases(t *testing.T) {
	d := memdriver.New()
	ctx := context.Background()
	req := driver.QueueRequest{Key: "pool", ID: "p1", TTL: 10 * time.Second, Mode: driver.ModePermit, Limit: 2}
	if res, err := d.Enqueue(ctx, req); err != nil || !res.Granted {
		t.Fatalf("Enqueue = %+v, %v", res, err)
	}
	rel := []driver.ReleaseRequest{{Kind: driver.KindPermit, Key: "pool", ID: "p1"}}
	if got, err := d.Release(ctx, rel); err != nil || got[0] != driver.Released {
		t.Fatalf("Release = %v, %v", got, err)
	}
	d.Restart(d.Snapshot())
	if got, err := d.Release(ctx, rel); err != nil || got[0] != driver.AlreadyReleased {
		t.Fatalf("retried Release after the restart = %v, %v; want AlreadyReleased", got, err)
	}
}

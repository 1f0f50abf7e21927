package dlock

// Wall-clock jumps (an NTP step, an operator's date command, a VM restored
// from a snapshot) must not move a lease's validity deadline. dlock reads
// time only through cfg.now and only compares those readings with each other;
// readings from time.Now carry a monotonic component, and when both sides of
// Sub/Before carry one, Go compares the monotonic readings alone.
//
// What these tests can show: with a clock whose wall reading jumps by hours
// while its monotonic reading runs on — exactly what time.Now returns after
// the system clock is stepped — a lease keeps its renewals and ends at its
// deadline as if nothing happened. And, so that the test is known to be able
// to fail, the same jumps on a clock stripped of its monotonic reading
// (t.Round(0), a wall-clock-only source) do break dlock: a forward jump ends a
// healthy lease at once, a backward jump keeps a lease that can no longer
// renew "held" long after the store has expired it. What they cannot show is
// the operating system's behaviour; that the monotonic clock ignores steps is
// the platform's promise, which the time package relies on too.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/dlockio/dlock/driver"
)

// timeLayout mirrors time.Time's fields. With the monotonic bit (63) set,
// wall holds seconds since 1885 in bits 30-62 and nanoseconds in bits 0-29,
// and ext holds the monotonic reading.
type timeLayout struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

const hasMonotonic = 1 << 63

// wallShifted returns t with its wall reading moved by whole seconds of d and
// its monotonic reading unchanged. The time package cannot build such a value
// (Add moves both readings, Round(0) drops the monotonic one), so the wall
// field is written directly; checkWallShift verifies the result through the
// public API before any test relies on it.
func wallShifted(t time.Time, d time.Duration) time.Time {
	p := (*timeLayout)(unsafe.Pointer(&t))
	if p.wall&hasMonotonic == 0 {
		return t // no monotonic reading to keep: checkWallShift fails first
	}
	p.wall += uint64(int64(d/time.Second)) << 30 // wraps correctly for negative d
	return t
}

func checkWallShift(t *testing.T) {
	t.Helper()
	for _, d := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		base := time.Now()
		s := wallShifted(base, d)
		if !s.Equal(base) || s.Sub(base) != 0 || s.Round(0).Sub(base.Round(0)) != d {
			t.Fatalf("wallShifted(%v) = %v from %v: time.Time's layout changed; update timeLayout", d, s, base)
		}
	}
}

// jumpClock is time.Now with an adjustable wall-clock step. With strip set
// it returns wall-clock-only readings, as a time source without a monotonic
// clock would.
type jumpClock struct {
	strip bool
	jump  atomic.Int64 // time.Duration applied from now on
}

func (c *jumpClock) now() time.Time {
	t, j := time.Now(), time.Duration(c.jump.Load())
	if c.strip {
		return t.Round(0).Add(j)
	}
	return wallShifted(t, j)
}

// clockDriver is an in-memory store whose renewals succeed or fail on demand.
type clockDriver struct {
	mu       sync.Mutex
	token    uint64
	renewErr error
}

// clockMargin is clockDriver's ExpiryMargin.
const clockMargin = 2 * time.Millisecond

// testDrift is the engine's drift for clockDriver: 1% of the TTL, the
// expiry margin, and 2 ms of timer slack.
func testDrift(ttl time.Duration) time.Duration { return ttl/100 + clockMargin + 2*time.Millisecond }

func (d *clockDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{TTLUnit: time.Millisecond, MinTTL: time.Millisecond, ExpiryMargin: clockMargin, MaxBatch: 1000, ContextAware: true}
}

func (d *clockDriver) Acquire(context.Context, driver.AcquireRequest) (driver.AcquireResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.token++
	return driver.AcquireResult{Acquired: true, Token: d.token}, nil
}

func (d *clockDriver) Release(_ context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	res := make([]driver.ReleaseResult, len(reqs))
	for i := range res {
		res[i] = driver.Released
	}
	return res, nil
}

func (d *clockDriver) Renew(_ context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.renewErr != nil {
		return nil, d.renewErr
	}
	held := make([]bool, len(reqs))
	for i := range held {
		held[i] = true
	}
	return held, nil
}

func (d *clockDriver) Watch(func(string)) (driver.Watcher, error) { return nopWatcher{}, nil }
func (d *clockDriver) Close() error                               { return nil }

type nopWatcher struct{}

func (nopWatcher) Add(context.Context, string) error    { return nil }
func (nopWatcher) Remove(context.Context, string) error { return nil }
func (nopWatcher) Close() error                         { return nil }

func TestDefaultClockIsMonotonic(t *testing.T) {
	c, err := New(&clockDriver{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s := c.cfg.now().String(); !strings.Contains(s, " m=") {
		t.Fatalf("default clock reading %q has no monotonic component", s)
	}
}

// leaseUnderJump takes a lease on a client using clk, steps clk's wall clock
// by jump once the lease is held, and reports when (since just before Lock)
// the lease ended, or 0 if it was still held after watch.
func leaseUnderJump(t *testing.T, clk *jumpClock, jump time.Duration, renewals error, ttl, watch time.Duration) time.Duration {
	t.Helper()
	drv := &clockDriver{renewErr: renewals}
	// The clock goes in as an option: the watchdog reads it from New on.
	withClock := Option(func(cfg *clientConfig) error { cfg.now = clk.now; return nil })
	c, err := New(drv, withClock, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithRenewRetryDelay(ttl/10))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	l, err := c.Lock(context.Background(), "clock", WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	clk.jump.Store(int64(jump))
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), ErrLockLost) {
			t.Fatalf("lease ended with %v, want ErrLockLost", l.Err())
		}
		return time.Since(start)
	case <-time.After(watch):
		_ = l.Unlock(context.Background())
		return 0
	}
}

func TestLeaseValidityIgnoresWallClockJumps(t *testing.T) {
	checkWallShift(t)
	const ttl = 300 * time.Millisecond
	const watch = 3 * ttl
	unreachable := errors.New("store unreachable")

	// A forward step while renewals succeed: the lease must stay held.
	t.Run("forward 2h, renewals succeed", func(t *testing.T) {
		if ended := leaseUnderJump(t, &jumpClock{}, 2*time.Hour, nil, ttl, watch); ended != 0 {
			t.Fatalf("healthy lease lost %v after Lock when the wall clock jumped forward", ended)
		}
		// Control: on wall time alone the jump kills the healthy lease early.
		ended := leaseUnderJump(t, &jumpClock{strip: true}, 2*time.Hour, nil, ttl, watch)
		if ended == 0 || ended >= ttl-testDrift(ttl) {
			t.Fatalf("control: wall-only clock ended the lease at %v, expected well before its deadline", ended)
		}
	})

	// A backward step while renewals fail: the lease must still end at its
	// deadline, before the store can expire the key.
	t.Run("backward 2h, renewals fail", func(t *testing.T) {
		ended := leaseUnderJump(t, &jumpClock{}, -2*time.Hour, unreachable, ttl, watch)
		if ended == 0 {
			t.Fatalf("lease still held %v after Lock with no renewal succeeding (TTL %v)", watch, ttl)
		}
		if ended < ttl-testDrift(ttl) || ended > ttl+200*time.Millisecond {
			t.Fatalf("lease ended %v after Lock, want its deadline %v", ended, ttl-testDrift(ttl))
		}
		// Control: on wall time alone the lease outlives its expiry.
		if ended := leaseUnderJump(t, &jumpClock{strip: true}, -2*time.Hour, unreachable, ttl, watch); ended != 0 {
			t.Fatalf("control: wall-only clock ended the lease at %v, expected it to be believed held", ended)
		}
	})
}

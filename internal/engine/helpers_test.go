package engine

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestEngine returns an engine on drv (a fresh in-memory store if nil),
// closed at the end of the test.
func newTestEngine(t testing.TB, drv driver.Driver, tweak ...func(*Config)) *Engine {
	t.Helper()
	if drv == nil {
		drv = memdriver.New()
	}
	cfg := Config{Driver: drv, Logger: quiet(), RetryDelay: 20 * time.Millisecond}
	for _, f := range tweak {
		f(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func req(key string, ttl time.Duration) driver.AcquireRequest {
	return driver.AcquireRequest{Key: key, TTL: ttl, Owner: driver.Owner{Host: "test", PID: 1}}
}

// lockReq is the Request of the plain lock key: one attempt, or with wait
// a wait; with renew renewed until released.
func lockReq(key string, ttl time.Duration, wait, renew bool) Request {
	return Request{Key: key, TTL: ttl, Owner: driver.Owner{Host: "test", PID: 1}, Wait: wait, Renew: renew}
}

// fakeClock is a monotonic-bearing clock that moves only when told.
type fakeClock struct {
	base time.Time
	off  atomic.Int64
}

func newFakeClock() *fakeClock               { return &fakeClock{base: time.Now()} }
func (c *fakeClock) now() time.Time          { return c.base.Add(time.Duration(c.off.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// held reports whether the store holds key for anyone.
func held(t testing.TB, drv driver.Driver, key string) bool {
	t.Helper()
	_, ok, err := drv.(driver.Inspector).Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}

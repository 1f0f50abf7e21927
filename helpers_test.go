package dlock_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// newLocker returns a dlock Client on its own go-redis connection to addr;
// both are closed at the end of the test (the Client first).
func newLocker(t testing.TB, addr string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return newLockerOn(t, redisserver.NewClient(t, addr), nil, opts...)
}

// newLockerOn returns a Client using rdb (any UniversalClient, closed at the
// end of the test) through the Redis driver, optionally wrapped by wrap.
func newLockerOn(t testing.TB, rdb redis.UniversalClient, wrap func(driver.Driver) driver.Driver, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	t.Cleanup(func() { _ = rdb.Close() })
	var drv driver.Driver
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		drv = wrap(drv)
	}
	opts = append([]dlock.Option{dlock.WithLogger(quietLogger())}, opts...)
	c, err := dlock.New(drv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockKey is where the Redis driver keeps a lock with the default prefix.
func lockKey(name string) string { return redisdriver.DefaultPrefix + "{" + name + "}" }

// isHeld reports whether the store holds the lock for anyone.
func isHeld(t testing.TB, rdb *redis.Client, name string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), lockKey(name)).Result()
	if err == redis.Nil {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v != ""
}

// waitFreed fails the test if any of the named locks is still held in the
// store after d.
func waitFreed(t testing.TB, rdb *redis.Client, d time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, name := range names {
		for isHeld(t, rdb, name) {
			if time.Now().After(deadline) {
				t.Fatalf("lock %q still held after %v", name, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// waitDone fails the test if the lease has not ended within d.
func waitDone(t testing.TB, l *dlock.Lease, d time.Duration) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(d):
		t.Fatalf("lease %q still held after %v", l.Key(), d)
	}
}

func leaseCause(l *dlock.Lease) error { return context.Cause(l.Context()) }

package leasecheck

import (
	"context"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// NewLocker returns a dlock Client on its own go-redis connection to addr;
// both are closed at the end of the test (the Client first).
func NewLocker(t testing.TB, addr string, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return NewLockerOn(t, redisserver.NewClient(t, addr), nil, opts...)
}

// NewLockerOn returns a Client using rdb (any UniversalClient, closed at
// the end of the test) through the Redis driver, wrapped by wrap unless it
// is nil. The Client logs nowhere unless opts give it a logger.
func NewLockerOn(t testing.TB, rdb redis.UniversalClient, wrap func(driver.Driver) driver.Driver, opts ...dlock.Option) *dlock.Client {
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
	opts = append([]dlock.Option{dlock.WithLogger(QuietLogger())}, opts...)
	c, err := dlock.New(drv, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// LockKey is where the Redis driver keeps the lock name with the default
// prefix.
func LockKey(name string) string { return redisdriver.DefaultPrefix + "{" + name + "}" }

// IsHeld reports whether the store holds the lock name for anyone.
func IsHeld(t testing.TB, rdb *redis.Client, name string) bool {
	t.Helper()
	v, err := rdb.Get(context.Background(), LockKey(name)).Result()
	if err == redis.Nil {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v != ""
}

package redisdriver_test

import (
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/redis/go-redis/v9"
)

// The tests that drive a Redis deployment through a dlock Client (Cluster,
// Sentinel, the queue keys' lifetime) use the helpers of the root
// package's tests, from internal/testkit/leasecheck, by these short names.
var (
	newLocker   = leasecheck.NewLocker
	ctxTimeout  = leasecheck.Context
	isHeld      = leasecheck.IsHeld
	waitDone    = leasecheck.WaitDone
	got         = leasecheck.Got
	unlock      = leasecheck.Unlock
	acquired    = leasecheck.Acquired
	receive     = leasecheck.Receive
	notYet      = leasecheck.NotYet
	waitInQueue = leasecheck.WaitInQueue
)

// newLockerOn returns a Client using rdb (any UniversalClient, closed at
// the end of the test) through the Redis driver.
func newLockerOn(t testing.TB, rdb redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return leasecheck.NewLockerOn(t, rdb, nil, opts...)
}

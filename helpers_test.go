package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/redis/go-redis/v9"
)

// newLocker and newLockerOn are leasecheck's NewLocker and NewLockerOn,
// under the names counts_test.go calls them by.
var (
	newLocker   = leasecheck.NewLocker
	newLockerOn = leasecheck.NewLockerOn
)

// waitFreed fails the test if any of the named locks is still held in the
// store after d.
func waitFreed(t testing.TB, rdb *redis.Client, d time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, name := range names {
		for leasecheck.IsHeld(t, rdb, name) {
			if time.Now().After(deadline) {
				t.Fatalf("lock %q still held after %v", name, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func leaseCause(l *dlock.Lease) error { return context.Cause(l.Context()) }

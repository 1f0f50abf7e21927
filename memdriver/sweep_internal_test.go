package memdriver

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Expired locks and remembered releases of keys that are never looked at
// again must not stay in memory.
func TestSweepForgetsUntouchedKeys(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := New(WithClock(func() time.Time { return now }))
	defer d.Close()
	ctx := context.Background()
	const n = 1000
	for i := range n {
		k := strconv.Itoa(i)
		if _, err := d.Acquire(ctx, driver.AcquireRequest{Key: k, ID: "a", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half released, half left to expire
			if _, err := d.Release(ctx, []driver.ReleaseRequest{{Key: k, ID: "a"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	now = now.Add(time.Second)
	for range 2*n + 64 {
		if _, err := d.Acquire(ctx, driver.AcquireRequest{Key: "other", ID: "b", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	d.s.mu.Lock()
	locks, released := len(d.s.locks), len(d.s.released)
	d.s.mu.Unlock()
	if locks != 1 || released != 0 {
		t.Errorf("after every TTL ran out: %d locks and %d releases remembered, want 1 and 0", locks, released)
	}
}

package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/redistest"
)

// On one server the release publishes from outside the script: waiters must
// still be notified, also when the server has no cached copy of the script
// (NOSCRIPT, then EVAL), and a repeated release is still recognised.
func TestReleaseNotifiesWithAndWithoutCachedScript(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := newDriver(t, rdb)
	sub := rdb.Subscribe(ctx, d.channel("k"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	for i, flush := range []bool{true, false} {
		mustAcquire(t, d, "k", "a")
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		mustRelease(t, d, "k", "a")
		if _, err := sub.ReceiveMessage(ctx); err != nil {
			t.Fatalf("release %d: no notification: %v", i, err)
		}
		if n := rdb.Exists(ctx, d.lockKey("k")).Val(); n != 0 {
			t.Fatalf("release %d: the lock key still exists", i)
		}
		if res, err := d.Release(ctx, driver.ReleaseRequest{Key: "k", ID: "a"}); err != nil || res != driver.AlreadyReleased {
			t.Fatalf("release %d repeated: %v, %v", i, res, err)
		}
		if _, err := sub.ReceiveMessage(ctx); err != nil { // the repeat publishes too
			t.Fatal(err)
		}
	}
}

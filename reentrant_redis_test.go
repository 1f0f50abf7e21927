package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// commandsProcessed is the server's count of commands processed so far
// (INFO counts itself after it has answered).
func commandsProcessed(t testing.TB, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no total_commands_processed in INFO stats")
	return 0
}

// On a real server: a Lock under the lease's Context is a nested hold
// with the same token, costs no command at all, counts, and unlocking it
// (twice) leaves the lock held; the outer Unlock releases it.
func TestReentrantSameTokenNoRoundTrip(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	c := leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 10*time.Second)
	outer, err := c.Lock(ctx, "re")
	if err != nil {
		t.Fatal(err)
	}
	before := commandsProcessed(t, rdb)
	inner, err := c.Lock(outer.Context(), "re")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.TryLock(inner.Context(), "re")
	if err != nil {
		t.Fatal(err)
	}
	if !inner.Nested() || !again.Nested() || outer.Nested() {
		t.Fatalf("Nested: outer %v, inner %v, again %v", outer.Nested(), inner.Nested(), again.Nested())
	}
	if inner.Token() != outer.Token() || again.Token() != outer.Token() {
		t.Fatalf("tokens: outer %d, nested %d and %d; want the same", outer.Token(), inner.Token(), again.Token())
	}
	if n := outer.Holds(); n != 3 || inner.Holds() != 3 {
		t.Fatalf("Holds = %d (nested sees %d), want 3", n, inner.Holds())
	}
	for range 2 {
		if err := again.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := inner.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// One: the INFO that read before.
	if n := commandsProcessed(t, rdb) - before; n != 1 {
		t.Fatalf("nested Lock/TryLock/Unlock: server processed %d commands, want none", n-1)
	}
	if !errors.Is(inner.Err(), dlock.ErrReleased) || outer.Err() != nil || outer.Holds() != 1 {
		t.Fatalf("after nested unlocks: nested Err %v, outer Err %v, Holds %d", inner.Err(), outer.Err(), outer.Holds())
	}
	if !leasecheck.IsHeld(t, rdb, "re") {
		t.Fatal("unlocking nested holds released the lock")
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if leasecheck.IsHeld(t, rdb, "re") || outer.Holds() != 0 {
		t.Fatalf("after the outer Unlock: held %v, Holds %d", leasecheck.IsHeld(t, rdb, "re"), outer.Holds())
	}
}

package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// A waiter that joined behind another, and became the head when that one
// gave up, takes the lock over at the moment a crashed holder's key
// expires: its poke, at the expiry its enqueue was told of, grants the
// name (Redis has no expiry hook). Before, only a waiter at the head when
// it joined was told the expiry, and this one got the lock at its next
// renewal instead: here 0.2 TTL late, up to TTL/3 in general.
func TestFairLockCrashedHolderTakenOverByTheNewHead(t *testing.T) {
	srv := redisserver.Start(t)
	admin := srv.Client(t)
	holderRdb := redisserver.NewClient(t, srv.Addr())
	holder := leasecheck.NewLockerOn(t, holderRdb, nil)
	first, second := leasecheck.NewLocker(t, srv.Addr()), leasecheck.NewLocker(t, srv.Addr())
	ctx := leasecheck.Context(t, 30*time.Second)
	const ttl = 3 * time.Second
	start := time.Now()
	if _, err := holder.Lock(ctx, "crash", dlock.WithTTL(ttl)); err != nil {
		t.Fatal(err)
	}
	firstCtx, giveUp := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := first.Lock(firstCtx, "crash", dlock.WithTTL(ttl))
		gaveUp <- err
	}()
	leasecheck.WaitInQueue(t, holder, "crash", 1)
	// Join a fifth of the TTL after the holder's acquisition, so that this
	// waiter's renewals (every TTL/3 from its join) come well after the
	// holder's key expires: only a poke at the expiry is prompt.
	time.Sleep(time.Until(start.Add(ttl / 5)))
	ch := leasecheck.Acquired(t, func() (*dlock.Lease, error) { return second.Lock(ctx, "crash", dlock.WithTTL(ttl)) })
	leasecheck.WaitInQueue(t, holder, "crash", 2)
	if time.Since(start) >= ttl/3 {
		t.Skipf("the waiters took %v to queue: the holder renewed before its crash, which the test needs it not to", time.Since(start))
	}
	crashed, err := admin.Get(ctx, leasecheck.LockKey("crash")).Result()
	if err != nil {
		t.Fatal(err)
	}
	_ = holderRdb.Close() // the holder crashes: never renewed or released again
	giveUp()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first waiter, cancelled: %v", err)
	}
	expired := valueChanged(t, admin, leasecheck.LockKey("crash"), crashed, ttl+time.Second)
	got := leasecheck.Receive(t, ch, "the new head")
	if late := time.Since(expired); late > 250*time.Millisecond {
		t.Errorf("the new head got the lock %v after the crashed holder's key expired, want at once", late.Round(time.Millisecond))
	}
	leasecheck.Unlock(t, got)
}

// valueChanged polls key until its value is no longer was (the key
// expired: an expired key reads as missing at once; or someone took it)
// and returns when it saw that.
func valueChanged(t *testing.T, rdb *redis.Client, key, was string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, err := rdb.Get(context.Background(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if v != was {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q unchanged after %v", key, within)
		}
		time.Sleep(time.Millisecond)
	}
}

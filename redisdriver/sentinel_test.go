package redisdriver_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// Through a Sentinel failover client: the driver accepts it like any
// UniversalClient, and locking, waiting and renewal work through it.
func TestSentinelClient(t *testing.T) {
	master := redisserver.Start(t)
	sentinel := redisserver.Start(t, redisserver.WithArgs("--sentinel"), redisserver.WithConfigFile(fmt.Sprintf(
		"sentinel monitor primary 127.0.0.1 %d 1\nsentinel down-after-milliseconds primary 1000\n", master.Port())))
	newSentinelLocker := func() *dlock.Client {
		return newLockerOn(t, redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    "primary",
			SentinelAddrs: []string{sentinel.Addr()},
		}))
	}
	a, b := newSentinelLocker(), newSentinelLocker()
	ctx := ctxTimeout(t, 20*time.Second)
	const ttl = 600 * time.Millisecond // renewals every 200 ms keep it on a loaded machine
	l, err := a.TryLock(ctx, "via-sentinel", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "via-sentinel"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v", err)
	}
	// The lock lives on the master the Sentinel named.
	if !isHeld(t, master.Client(t), "via-sentinel") {
		t.Fatal("lock not found on the master")
	}
	got := make(chan error, 1)
	go func() {
		l2, err := b.Lock(ctx, "via-sentinel", dlock.WithTTL(30*time.Second))
		if err == nil {
			err = l2.Unlock(ctx)
		}
		got <- err
	}()
	select { // renewals keep it through several TTLs
	case <-l.Done():
		t.Fatalf("lease lost: %v", l.Err())
	case <-time.After(3 * ttl):
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

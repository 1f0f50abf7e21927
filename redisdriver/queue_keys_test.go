package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// Redis deletes a sorted set when its last member goes, and ZADD then
// re-creates it without an expiry. The waiter set empties while the name
// keeps other queued leases (here a reader's release record) when its last
// waiter is granted; a waiter that joins after that must leave every key
// of the name with an expiry, no later than 1.25 TTL away.
func TestQueueKeysKeepAnExpiryWhenTheWaitersRefill(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	const ttl = 10 * time.Second
	enqueue := func(id string, mode driver.Mode) driver.QueueResult {
		t.Helper()
		res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: id, TTL: ttl, Mode: mode, Wait: true, Inbox: "box"})
		if err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
		return res
	}
	if res := enqueue("reader", driver.ModeShared); !res.Granted {
		t.Fatalf("reader: %+v, want granted", res)
	}
	if res := enqueue("writer", driver.ModeExclusive); !res.Queued {
		t.Fatalf("writer: %+v, want queued", res)
	}
	// The reader's release grants the writer, its last waiter: the waiter
	// set is gone, the reader's release record keeps the others.
	res, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindRead, Key: "k", ID: "reader"}})
	if err != nil || res[0] != driver.Released {
		t.Fatalf("reader release: %v, %v", res, err)
	}
	if n, err := rdb.Exists(ctx, d.lockKey("k")+":w").Result(); err != nil || n != 0 {
		t.Fatalf("waiter set exists (%d, %v) after its last waiter was granted", n, err)
	}
	// Joins while the writer holds: the short path, which does not settle.
	if res := enqueue("late", driver.ModeExclusive); !res.Queued {
		t.Fatalf("late waiter: %+v, want queued", res)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 5 {
		t.Fatalf("keys %v: want the lock, its record and the queue keys", keys)
	}
	for _, k := range keys {
		pttl, err := rdb.PTTL(ctx, k).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case pttl < 0:
			t.Errorf("key %q has no expiry (PTTL %v)", k, pttl)
		case pttl > ttl+ttl/4:
			t.Errorf("key %q expires in %v, more than 1.25 TTL", k, pttl)
		}
	}
}

package redisdriver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// waitPlacesExpired waits, by the server's clock and without a script
// (any queue script would drop the expired places first), until the places
// of the waiters ids on key have expired.
func waitPlacesExpired(t *testing.T, rdb redis.Cmdable, d *Driver, key string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		_, exp, err := parseWaiter(id, rdb.HGet(ctx, d.lockKey(key)+":d", id).Val())
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, id+"'s place expired", func() bool {
			now, err := rdb.Time(ctx).Result()
			return err == nil && now.UnixMilli() > exp
		})
	}
}

// A waiter whose place expired behind a live head is out of the queue
// although its record is dropped only when it would reach the head: its
// renewal answers lost, its poke queues it anew at the back, and its
// release answers NotHeld.
func TestPlaceExpiredBehindALiveHead(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	const long, short = time.Minute, 300 * time.Millisecond
	enqueue := func(id string, ttl time.Duration) {
		t.Helper()
		res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: id, TTL: ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: "box"})
		if err != nil || !res.Queued {
			t.Fatalf("enqueue %s: %+v, %v; want queued", id, res, err)
		}
	}
	order := func() []string {
		t.Helper()
		return waiterIDs(t, d, "k")
	}
	mustAcquire(t, d, "k", "holder")
	enqueue("a", long)
	enqueue("dead", short)
	enqueue("gone", short)
	enqueue("z", long) // so that the expired places are not at the tail
	waitPlacesExpired(t, rdb, d, "k", "dead", "gone")

	res, err := d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindWaiter, Key: "k", ID: "dead", TTL: long}})
	if err != nil || res[0] {
		t.Fatalf("renewal of an expired place: %v, %v; want false", res, err)
	}
	rel, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindWaiter, Key: "k", ID: "gone"}})
	if err != nil || rel[0] != driver.NotHeld {
		t.Fatalf("release of an expired place: %v, %v; want NotHeld", rel, err)
	}
	enqueue("b", long)
	enqueue("dead", long) // its poke: a new place, behind b
	if got := order(); !slices.Equal(got, []string{"a", "z", "b", "dead"}) {
		t.Fatalf("waiters %v; want [a z b dead]", got)
	}
	if ids := rdb.LRange(ctx, d.lockKey("k")+":w", 0, -1).Val(); !slices.Equal(ids, []string{"a", "z", "b", "dead"}) {
		t.Fatalf("waiter list %v; want [a z b dead]: the expired places' entries gone", ids)
	}
	for _, next := range []string{"a", "z", "b", "dead"} {
		prev := map[string]string{"a": "holder", "z": "a", "b": "z", "dead": "b"}[next]
		mustRelease(t, d, "k", prev)
		if v := rdb.Get(ctx, d.lockKey("k")).Val(); len(v) < len(next) || v[:len(next)+1] != next+sep {
			t.Fatalf("after %s's release the lock is %q; want %s's", prev, v, next)
		}
	}
}

// Waiters that died at the tail of a queue held up by a long hold (a
// process that crashes and comes back, over and over) do not pile up: the
// next script that settles the name, here the live head's renewal, drops
// them with their records.
func TestPlacesExpiredAtTheTailAreDropped(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	mustAcquire(t, d, "k", "holder")
	for _, w := range []struct {
		id  string
		ttl time.Duration
	}{{"a", time.Minute}, {"d1", 300 * time.Millisecond}, {"d2", 300 * time.Millisecond}} {
		res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: w.id, TTL: w.ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: "box"})
		if err != nil || !res.Queued {
			t.Fatalf("enqueue %s: %+v, %v; want queued", w.id, res, err)
		}
	}
	waitPlacesExpired(t, rdb, d, "k", "d1", "d2")
	res, err := d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindWaiter, Key: "k", ID: "a", TTL: time.Minute}})
	if err != nil || !res[0] {
		t.Fatalf("the head's renewal: %v, %v", res, err)
	}
	if ids := rdb.LRange(ctx, d.lockKey("k")+":w", 0, -1).Val(); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("waiter list %v; want [a]", ids)
	}
	for _, id := range []string{"d1", "d2"} {
		if rdb.HExists(ctx, d.lockKey("k")+":d", id).Val() {
			t.Errorf("the record of %s is still there", id)
		}
	}
}

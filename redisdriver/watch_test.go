package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// watchKeys opens a watcher whose notifications go to the returned channel.
func watchKeys(t *testing.T, d *Driver) (*watcher, <-chan string) {
	t.Helper()
	got := make(chan string, 64)
	w, err := d.Watch(func(key string) {
		select {
		case got <- key:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w.(*watcher), got
}

// expectRelease releases a lock on key and waits up to within for the
// watcher to hear of it, trying again every so often: a release published
// while the subscription is being re-established is lost by design (a
// waiter falls back to its TTL), so one try proves nothing either way.
// Notifications of other keys (late ones of earlier tries) are skipped.
func expectRelease(t *testing.T, d *Driver, got <-chan string, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i := 0; time.Now().Before(deadline); i++ {
		id := "r" + string(rune('a'+i%26))
		mustAcquire(t, d, key, id)
		mustWaitFor(t, d, key)
		mustRelease(t, d, key, id)
		retry := time.After(50 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case k := <-got:
				if k == key {
					return
				}
			case <-retry:
				waiting = false
			}
		}
	}
	t.Fatalf("no release of %q heard within %v", key, within)
}

// Add, Remove and Add again in quick succession must leave the key
// subscribed: the second Add's waiter would otherwise sleep a whole TTL.
func TestWatcherResubscribeRace(t *testing.T) {
	srv := redisserver.Start(t)
	d := newDriver(t, srv.Client(t))
	w, got := watchKeys(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 50 {
		if err := w.Add(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if err := w.Remove(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Add(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	expectRelease(t, d, got, "k", time.Second)
	pub := srv.Client(t)
	if n := pub.PubSubNumSub(ctx, d.channel("k")).Val()[d.channel("k")]; n != 1 {
		t.Fatalf("%d subscribers on the channel, want 1", n)
	}
}

// After an Add was cancelled before its subscription was confirmed, and
// the pub/sub connection was then lost with the confirmation in flight,
// the next Add of that key is confirmed at once and hears releases. (A
// watcher that counted confirmations kept waiting for the lost one, and
// every later Add of the key stalled 3 s and failed.)
func TestWatcherConfirmsAfterCancelledAddAndReconnect(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	d := newDriver(t, redisserver.NewClient(t, proxy.Addr()))
	w, got := watchKeys(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Add(ctx, "warm"); err != nil { // opens the pub/sub connection
		t.Fatal(err)
	}

	proxy.SetLatency(time.Hour) // replies are held in the proxy from now on
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := w.Add(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("Add confirmed with every reply held back")
	}
	if err := w.Remove(ctx, "k"); err != nil { // as the engine does after a failed Add
		t.Fatal(err)
	}
	proxy.SetLatency(0)
	proxy.CloseAll() // the held replies are lost with the connection

	start := time.Now()
	if err := w.Add(ctx, "k"); err != nil {
		t.Fatalf("Add after the reconnect: %v (after %v)", err, time.Since(start))
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Add after the reconnect took %v", took)
	}
	expectRelease(t, d, got, "k", 5*time.Second)
}

// stalledAdd starts an Add of "k" whose confirmation a proxy holds back
// (after a warm-up Add, so the pub/sub connection exists): the watcher,
// its driver on the proxy, the server, the proxy, the notifications, a
// context bounding the test, and where the Add's result will arrive.
func stalledAdd(t *testing.T) (*redisserver.Server, *redisserver.Proxy, *Driver, *watcher, <-chan string, context.Context, <-chan error) {
	t.Helper()
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	d := newDriver(t, redisserver.NewClient(t, proxy.Addr()))
	w, got := watchKeys(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if err := w.Add(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(time.Hour)
	added := make(chan error, 1)
	go func() { added <- w.Add(ctx, "k") }()
	return srv, proxy, d, w, got, ctx, added
}

// An Add waiting for its confirmation when the connection is lost is
// confirmed on the new connection, without any other Add coming along.
func TestWatcherConfirmsAcrossReconnect(t *testing.T) {
	srv, proxy, d, _, got, ctx, added := stalledAdd(t)
	admin := srv.Client(t)
	// Once Redis has the subscription, its confirmation is in the proxy.
	eventually(t, 5*time.Second, "subscription reaches the server", func() bool {
		return admin.PubSubNumSub(ctx, d.channel("k")).Val()[d.channel("k")] == 1
	})
	proxy.SetLatency(0)
	proxy.CloseAll()
	select {
	case err := <-added:
		if err != nil {
			t.Fatalf("Add across the reconnect: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Add across the reconnect did not return")
	}
	expectRelease(t, d, got, "k", 5*time.Second)
}

// When Redis drops the pub/sub connection (CLIENT KILL), existing
// subscriptions keep delivering and new ones are confirmed promptly.
func TestWatcherSurvivesClientKill(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	w, got := watchKeys(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Add(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	expectRelease(t, d, got, "k", 5*time.Second)
	start := time.Now()
	if err := w.Add(ctx, "j"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("Add after the kill: %v after %v", err, time.Since(start))
	}
	expectRelease(t, d, got, "j", 5*time.Second)
}

// A connection that stops answering (a partition without resets) is
// replaced by the health check, and notifications flow again once the
// network heals.
func TestWatcherReplacesSilentConnection(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	direct := newDriver(t, srv.Client(t)) // releases bypass the partition
	proxied := newDriver(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond}))
	w, got := watchKeys(t, proxied)
	w.health = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Add(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	first := w.currentPubSub()
	proxy.Blackhole(true)
	eventually(t, 5*time.Second, "silent connection replaced", func() bool { return w.currentPubSub() != first })
	proxy.Blackhole(false)
	expectRelease(t, direct, got, "k", 10*time.Second)
}

func (w *watcher) currentPubSub() *redis.PubSub {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ps
}

// Close wakes an Add waiting for its confirmation.
func TestWatcherCloseWakesAdd(t *testing.T) {
	_, proxy, d, w, _, ctx, added := stalledAdd(t)
	eventually(t, 5*time.Second, "Add waiting", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		s := w.subs[d.channel("k")]
		return s != nil && s.barrier != 0
	})
	// The replies stay held while Close runs: lifting the latency first
	// would let a reconnect confirm the Add before Close (which happened
	// on a loaded machine).
	_ = w.Close()
	select {
	case err := <-added:
		if err == nil {
			t.Fatal("Add returned nil after Close")
		}
	case <-ctx.Done():
		t.Fatal("Add still waiting after Close")
	}
	proxy.SetLatency(0)
	proxy.CloseAll()
	if err := w.Add(ctx, "k"); err == nil {
		t.Fatal("Add after Close: nil error")
	}
}

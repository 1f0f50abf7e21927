package redisdriver

import (
	"context"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/redistest"
)

// Add, Remove and Add again in quick succession must leave the key
// subscribed: the second Add's waiter would otherwise sleep a whole TTL.
func TestWatcherResubscribeRace(t *testing.T) {
	srv := redistest.Start(t)
	d, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	w, err := d.Watch(func(key string) { got <- key })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
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
	pub := srv.Client(t)
	if err := pub.Publish(ctx, d.channel("k"), "").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-got:
		if k != "k" {
			t.Fatalf("notified for %q", k)
		}
	case <-ctx.Done():
		t.Fatal("no notification after re-subscribing")
	}
	if n := pub.PubSubNumSub(ctx, d.channel("k")).Val()[d.channel("k")]; n != 1 {
		t.Fatalf("%d subscribers on the channel, want 1", n)
	}
}

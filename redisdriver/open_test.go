package redisdriver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/redistest"
)

// Open makes a working Client whose Close also closes its Redis client:
// the server sees the connections go.
func TestOpen(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open("redis://"+srv.Addr()+"/0?client_name=opened", dlock.WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := c.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if v := admin.Get(ctx, DefaultPrefix+"{k}").Val(); !strings.Contains(v, ":") || lease.Token() == 0 {
		t.Fatalf("lock value %q, token %d", v, lease.Token())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	opened := func() bool {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(list, "name=opened")
	}
	if !opened() {
		t.Fatal("no connection of the opened client")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "connections closed", func() bool { return !opened() })
}

func TestOpenRejectsBadArguments(t *testing.T) {
	if _, err := Open("localhost:6379"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("URL without scheme: %v", err)
	}
	if _, err := Open("redis://127.0.0.1:1", nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil option: %v", err)
	}
}

// A driver made by New leaves the client to its owner; one that owns it
// closes it, once.
func TestCloseOwnsOnlyItsClient(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	if err := newDriver(t, rdb).Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("New's driver closed the caller's client: %v", err)
	}
	d := newDriver(t, rdb)
	d.ownsClient = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("the owned client still works after Close")
	}
}

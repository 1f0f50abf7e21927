package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	dl "github.com/dlockio/dlock"
	"github.com/redis/go-redis/v9"
)

// A holder that died with a waiter queued: once its key expires, status
// and list report the lock the way the next command will find it, held by
// that waiter. Reading the queue is what grants it (Redis has no expiry
// hook); status and list used to read the plain lock first, saw it free,
// and then handed it on unseen: "not held", exit 1, while run -n found it
// held.
func TestStatusAndListAfterAHolderExpired(t *testing.T) {
	t.Parallel()
	url, admin := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, cmd := range []string{"status", "list"} {
		key := "expired-" + cmd
		holderRdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr})
		waiterRdb := redis.NewClient(&redis.Options{Addr: admin.Options().Addr})
		holder, waiter := testClient(t, holderRdb), testClient(t, waiterRdb)
		if _, err := holder.Lock(ctx, key, dl.WithTTL(time.Second)); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = waiter.Lock(ctx, key, dl.WithTTL(20*time.Second), dl.WithMeta("the waiter")) }()
		waitWaiters(t, holder, key, 1)
		// Both die: nothing of theirs reaches Redis any more.
		_ = holderRdb.Close()
		_ = waiterRdb.Close()
		for lockHeld(t, admin, key) { // until the holder's key expires
			time.Sleep(5 * time.Millisecond)
		}
		code, stdout, stderr := dlock(t, url, cmd, key)
		if code != 0 || !strings.Contains(stdout, "the waiter") {
			t.Errorf("%s after the holder expired: exit %d, stdout %q, stderr %q; want the waiter's grant", cmd, code, stdout, stderr)
		}
	}
}

// unlock --force on a name held only by readers says it cannot break
// them, instead of calling the lock free.
func TestUnlockForceOfReaders(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	c := testClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.RWMutex("read").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := dlock(t, url, "unlock", "--force", "read")
	if code != 1 || !strings.Contains(stderr, "no exclusive holder to break (1 reader or permit holder;") {
		t.Errorf("unlock --force of a read-held name: exit %d, stderr %q", code, stderr)
	}
	if r.Err() != nil {
		t.Errorf("the reader's lease ended: %v", r.Err())
	}
}

// status --json of a lock held exclusively with a waiter keeps the plain
// form's fields (token, since, held_ms) and gains the queue's.
func TestStatusJSONKeepsTheTokenWithWaiters(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	c := testClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _, _ = c.Lock(wctx, "busy") }()
	waitWaiters(t, c, "busy", 1)
	code, stdout, stderr := dlock(t, url, "status", "--json", "busy")
	var got struct {
		Held    bool             `json:"held"`
		Token   uint64           `json:"token"`
		HeldMS  *int64           `json:"held_ms"`
		Holders []map[string]any `json:"holders"`
		Waiters []map[string]any `json:"waiters"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v, %q; stderr %q", code, err, stdout, stderr)
	}
	if !got.Held || got.Token != l.Token() || got.HeldMS == nil || len(got.Holders) != 1 || len(got.Waiters) != 1 {
		t.Errorf("status --json of a held lock with a waiter: %s", stdout)
	}
}

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
// and list show the store as it is, the waiter still waiting, and change
// nothing (they are plain reads, which a read-only ACL user may run):
// Redis has no expiry hook, so the grant is made by the next request that
// touches the name, a live waiter's poke at the holder's expiry or a
// run -n. status says "not held (1 waiter)", exit 1.
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
		want := 0
		if cmd == "status" {
			want = 1
			if !strings.Contains(stdout, "the waiter") || !strings.Contains(stderr, "not held (1 waiter)") {
				t.Errorf("status after the holder expired: stdout %q, stderr %q; want the waiter, waiting", stdout, stderr)
			}
		} else if !strings.Contains(stdout, key) {
			t.Errorf("list after the holder expired: stdout %q; want the name with its waiter", stdout)
		}
		if code != want {
			t.Errorf("%s after the holder expired: exit %d, want %d (stderr %q)", cmd, code, want, stderr)
		}
		if n, err := admin.LLen(ctx, "dlock:{"+key+"}:w").Result(); err != nil || n != 1 || lockHeld(t, admin, key) {
			t.Errorf("%s changed the store: %d waiters left (%v), lock held %v", cmd, n, err, lockHeld(t, admin, key))
		}
		if code, stdout, _ := dlock(t, url, "run", "-n", key, "--", "true"); code == 0 || !lockHeld(t, admin, key) {
			t.Errorf("run -n after %s: exit %d, %q; want busy, the waiter granted by this request", cmd, code, stdout)
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

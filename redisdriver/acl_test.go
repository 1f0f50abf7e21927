package redisdriver_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// The two ACLs docs/security.md publishes, word for word (the test below
// checks that the page gives these, so the two cannot drift).
const (
	// aclApp may take, renew and release every kind of lease under the
	// default prefix, wait in queues and be handed a lock, and force a
	// release: what dlock run and the library need, as scripts.
	aclApp = "resetkeys ~dlock:* resetchannels &dlock:* -@all +hello +auth +ping " +
		"+evalsha +eval +subscribe +unsubscribe " +
		"+get +set +del +exists +mget +pttl +pexpire +pexpireat +rename +time " +
		"+hget +hset +hsetnx +hdel +hmget +hincrby " +
		"+lrange +lpos +lpop +lpush +lrem +rpop +rpush " +
		"+zadd +zcard +zrange +zrangebyscore +zrem +zscore +publish"
	// aclReadOnly may read dlock's keys and nothing else: dlock list and
	// dlock status. No Lua, no writes, no channels.
	aclReadOnly = "resetkeys %R~dlock:* resetchannels -@all +hello +auth +ping " +
		"+scan +get +pttl +lrange +zrange +hgetall +time"
)

// aclUser makes user with rules on srv and returns a go-redis client
// logged in as that user.
func aclUser(t *testing.T, srv *redisserver.Server, user, rules string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + user + "-pw"}
	for _, r := range strings.Fields(rules) {
		args = append(args, r)
	}
	if err := srv.Client(t).Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: user + "-pw",
		MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestPublishedACLs: with the application ACL a Client takes every kind
// of lease, has a fair lock handed to a waiter, and forces a release; with
// the read-only one a Client lists and inspects all of it, and can change
// nothing.
func TestPublishedACLs(t *testing.T) {
	page, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for user, rules := range map[string]string{"app": aclApp, "ops": aclReadOnly} {
		if line := "ACL SETUSER " + user + " on >PASSWORD " + rules + "\n"; !strings.Contains(string(page), line) {
			t.Errorf("docs/security.md does not give the ACL this test checks: %s", line)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := redisserver.Start(t)
	app := aclClient(t, srv, "app", aclApp)
	defer app.Close()
	ro := aclClient(t, srv, "ops", aclReadOnly)
	defer ro.Close()

	held, err := app.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("app Lock: %v", err)
	}
	waiter := make(chan error, 1)
	go func() {
		l, err := app.Lock(ctx, "job")
		if err == nil {
			err = l.Unlock(ctx)
		}
		waiter <- err
	}()
	reader, err := app.RWMutex("doc").RLock(ctx)
	if err != nil {
		t.Fatalf("app RLock: %v", err)
	}
	permit, err := app.Semaphore("pool", 2).Acquire(ctx)
	if err != nil {
		t.Fatalf("app semaphore: %v", err)
	}
	all, err := app.LockAll(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatalf("app LockAll: %v", err)
	}
	checkReadOnly(t, ctx, ro, held)

	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("app Unlock (a hand-off): %v", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("app waiter: %v", err)
	}
	for _, l := range []interface{ Unlock(context.Context) error }{reader, permit, all} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("app Unlock: %v", err)
		}
	}
	stuck, err := app.Lock(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := app.ForceRelease(ctx, "stuck"); err != nil || !ok {
		t.Fatalf("app ForceRelease: %v, %v", ok, err)
	}
	if err := stuck.Unlock(ctx); err == nil {
		t.Fatal("Unlock after a forced release: nil, want ErrNotHeld")
	}
}

// aclClient returns a dlock Client logged in to srv as user, made with
// rules; the caller closes it.
func aclClient(t *testing.T, srv *redisserver.Server, user, rules string) *dlock.Client {
	t.Helper()
	drv, err := redisdriver.New(aclUser(t, srv, user, rules))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkReadOnly checks what the read-only Client ro sees and may do while
// the application holds job (held, with a waiter queued), a reader's
// share of doc, a permit of pool, and a and b: it sees all of it and
// changes nothing.
func checkReadOnly(t *testing.T, ctx context.Context, ro *dlock.Client, held *dlock.Lease) {
	t.Helper()
	for {
		q, ok, err := ro.InspectQueue(ctx, "job")
		if err != nil {
			t.Fatalf("read-only InspectQueue: %v", err)
		}
		if ok && len(q.Waiters) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for the waiter, not a synchronisation
	}
	if info, ok, err := ro.Inspect(ctx, "job"); err != nil || !ok || info.Token != held.Token() {
		t.Fatalf("read-only Inspect: %+v, %v, %v; want token %d", info, ok, err, held.Token())
	}
	if infos, err := ro.List(ctx, ""); err != nil || len(infos) != 3 {
		t.Fatalf("read-only List: %d locks, %v; want job, a and b", len(infos), err)
	}
	if qs, err := ro.ListQueues(ctx, ""); err != nil || len(qs) != 3 {
		t.Fatalf("read-only ListQueues: %d names, %v; want job, doc and pool", len(qs), err)
	}
	if _, err := ro.TryLock(ctx, "other"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("read-only TryLock: %v; want NOPERM", err)
	}
	if _, _, err := ro.ForceRelease(ctx, "job"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("read-only ForceRelease: %v; want NOPERM", err)
	}
}

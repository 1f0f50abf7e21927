package faults

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// A hostile tenant on a shared Redis (docs/security.md): an ACL user who
// may read dlock's keys and publish on its channels, or load functions,
// but not write dlock's keys, must not be able to hand a lock to anyone
// or run code as another user.

// tenantClient connects to srv as an ACL user made with rules.
func tenantClient(t *testing.T, srv *redisserver.Server, user string, rules ...string) *redis.Client {
	t.Helper()
	ctx := context.Background()
	admin := srv.Client(t)
	args := []any{"ACL", "SETUSER", user, "on", ">" + user + "pw"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", user, err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: user + "pw",
		DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s: PING: %v", user, err)
	}
	return c
}

// tenantLocker is a Client of srv as its default (admin) user.
func tenantLocker(t *testing.T, srv *redisserver.Server, opts ...redisdriver.Option) (*dlock.Client, *recordingDriver) {
	t.Helper()
	d, err := redisdriver.New(srv.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	rd := &recordingDriver{Driver: d}
	c, err := dlock.New(rd, dlock.WithDefaultTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, rd
}

// TestForgedGrantGivesNoLock: a reader who can PUBLISH on the inbox
// channels sends a waiting Client a grant, with a token of its choosing,
// while another Client holds the lock. The waiter must keep waiting, and
// be granted, with a token of the store's, only when the holder releases.
// (Before grants were confirmed with the store, the waiter's Lock returned
// at once with token 2^53-1.)
func TestForgedGrantGivesNoLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := redisserver.Start(t)
	evil := tenantClient(t, srv, "evil", "resetkeys", "%R~dlock:*", "resetchannels", "&dlock:inbox:*",
		"-@all", "+hgetall", "+lrange", "+publish", "+hello", "+auth", "+ping")
	if err := evil.Set(ctx, "dlock:{k}", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("the reader could write a lock key: %v", err)
	}
	a, _ := tenantLocker(t, srv)
	b, bd := tenantLocker(t, srv)
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lease *dlock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.Lock(ctx, "k")
		got <- result{l, err}
	}()

	// What a reader sees: the waiter's id, and its inbox in its record.
	var id, inbox string
	for id == "" {
		ids, err := evil.LRange(ctx, "dlock:{k}:w", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 1 {
			rec, err := evil.HGetAll(ctx, "dlock:{k}:d").Result()
			if err != nil {
				t.Fatal(err)
			}
			if f := strings.Split(rec[ids[0]], ":"); len(f) > 3 {
				id, inbox = ids[0], f[3]
			}
		}
		select {
		case r := <-got:
			t.Fatalf("B's Lock returned while A holds: %v", r.err)
		case <-time.After(5 * time.Millisecond): // polling interval, not a synchronisation
		}
	}
	before := len(bd.drain())
	forged := uint64(1<<53 - 1)
	for {
		n, err := evil.Publish(ctx, "dlock:inbox:"+inbox, id+":"+strconv.FormatUint(forged, 10)+":k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break // delivered to B's subscription
		}
		time.Sleep(5 * time.Millisecond) // polling for the subscription, not a synchronisation
	}
	// The fixed waiter asks the store (one Enqueue, answered "queued");
	// the broken one returns with the forged token.
	deadline := time.Now().Add(20 * time.Second)
	for asked := 0; asked == 0; {
		select {
		case r := <-got:
			if r.err == nil {
				t.Fatalf("forged grant: B holds %q with token %d while A holds token %d", "k", r.lease.Token(), held.Token())
			}
			t.Fatalf("B's Lock failed after the forged grant: %v", r.err)
		case <-time.After(5 * time.Millisecond):
		}
		for _, e := range bd.drain() {
			if e.K == evEnq {
				if !e.OK {
					t.Fatalf("B's Enqueue after the forged grant did not queue it: %+v", e)
				}
				asked++
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("B neither returned nor asked the store within 20 s of the forged grant (%d records before)", before)
		}
	}
	select {
	case r := <-got:
		t.Fatalf("B's Lock returned while A holds: lease %v, %v", r.lease != nil, r.err)
	default:
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("B after A's release: %v", r.err)
	}
	if tok := r.lease.Token(); tok <= held.Token() || tok == forged {
		t.Fatalf("B's token %d after A's %d: not the store's", tok, held.Token())
	}
	if err := r.lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReplacedLibraryDoesNotRun: a tenant allowed FUNCTION LOAD but only
// its own keys replaces dlock's function library with the same code plus
// a line that copies another user's secret into the tenant's key. The
// default Driver runs scripts, found by the hash of their code, and never
// runs it; a Driver WithFunctions checks the code it finds before its
// first call and falls back to scripts. A Driver WithFunctions that
// checked before the replacement does run it: the window WithFunctions
// documents, and the proof that the attack is real.
func TestReplacedLibraryDoesNotRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := redisserver.Start(t)
	admin := srv.Client(t)
	if err := admin.Set(ctx, "secret:db", "s3cret", 0).Err(); err != nil {
		t.Fatal(err)
	}
	tenant := tenantClient(t, srv, "tenantb", "resetkeys", "~tenantB:*", "-@all", "+function|load", "+get",
		"+hello", "+auth", "+ping")

	early, _ := tenantLocker(t, srv, redisdriver.WithFunctions())
	lockOnce(ctx, t, early, "job") // loads and checks the library
	libs, err := admin.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "dlock_*", WithCode: true}).Result()
	if err != nil || len(libs) != 1 {
		t.Fatalf("FUNCTION LIST: %d libraries, %v", len(libs), err)
	}
	const loot = `redis.pcall("SET","tenantB:loot",tostring(redis.pcall("GET","secret:db")))`
	evilCode := strings.ReplaceAll(libs[0].Code, "(KEYS, ARGV)\n", "(KEYS, ARGV)\n"+loot+"\n")
	if evilCode == libs[0].Code {
		t.Fatal("found no function to patch in the library")
	}
	if err := tenant.Do(ctx, "FUNCTION", "LOAD", "REPLACE", evilCode).Err(); err != nil {
		t.Fatalf("the tenant's FUNCTION LOAD REPLACE: %v", err)
	}
	stolen := func() string {
		v, err := tenant.Get(ctx, "tenantB:loot").Result()
		if errors.Is(err, redis.Nil) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	scripts, _ := tenantLocker(t, srv)
	lockOnce(ctx, t, scripts, "job")
	checked, _ := tenantLocker(t, srv, redisdriver.WithFunctions())
	lockOnce(ctx, t, checked, "job")
	if v := stolen(); v != "" {
		t.Fatalf("the tenant's code ran for a Driver that never saw it: tenantB:loot = %q", v)
	}
	lockOnce(ctx, t, early, "job")
	if v := stolen(); v != "s3cret" {
		t.Fatalf("a Driver WithFunctions that checked before the replacement: tenantB:loot = %q, want the secret", v)
	}
}

// lockOnce takes and releases key on c.
func lockOnce(ctx context.Context, t *testing.T, c *dlock.Client, key string) {
	t.Helper()
	l, err := c.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

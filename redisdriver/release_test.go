package redisdriver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// One Release call answers each request of a batch on its own terms, with
// one script call and the PUBLISHes after it, and leaves other owners'
// locks alone.
func TestBatchedRelease(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	mustAcquire(t, d, "held", "a")
	mustWaitFor(t, d, "held")
	mustAcquire(t, d, "done", "b")
	mustRelease(t, d, "done", "b")
	mustAcquire(t, d, "other", "c")
	mustAcquireTTL(t, d, "expired", "e", 20*time.Millisecond)
	eventually(t, 5*time.Second, "lock expired", func() bool { return rdb.Exists(ctx, d.lockKey("expired")).Val() == 0 })

	reqs := []driver.ReleaseRequest{
		{Key: "held", ID: "a"}, {Key: "done", ID: "b"}, {Key: "other", ID: "x"},
		{Key: "expired", ID: "e"}, {Key: "never", ID: "n"}, {Key: "held", ID: "a"},
	}
	want := []driver.ReleaseResult{driver.Released, driver.AlreadyReleased, driver.NotHeld, driver.NotHeld, driver.NotHeld, driver.AlreadyReleased}
	before := commandStats(t, rdb)
	got, err := d.Release(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d %+v: %v, want %v", i, reqs[i], got[i], want[i])
		}
	}
	if calls := callsSince(t, rdb, before); scriptCalls(calls) != 1 || calls["publish"] != 1 {
		t.Errorf("calls %v, want one script call and one PUBLISH, for the one lock released", calls)
	}
	if v := rdb.Get(ctx, d.lockKey("other")).Val(); !strings.HasPrefix(v, "c:") {
		t.Errorf("another owner's lock became %q", v)
	}
}

// Waiters are notified of a release also when the server lost the
// driver's code (the library loaded again, or NOSCRIPT, then EVAL, which
// publishes), once, and a repeated release is still recognised and
// publishes nothing.
func TestReleaseNotifiesWithAndWithoutCachedScript(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) { testReleaseNotifies(t, m) })
	}
}

func testReleaseNotifies(t *testing.T, m codeMode) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := newDriver(t, rdb, m.opts...)
	sub := rdb.Subscribe(ctx, d.channel("k"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	// next returns the next message on the channel, after publishing a
	// marker of its own: a message before the marker came from the driver.
	next := func(i int) string {
		t.Helper()
		if err := rdb.Publish(ctx, d.channel("k"), "marker").Err(); err != nil {
			t.Fatal(err)
		}
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if m.Payload == "" { // the driver's: the marker must follow
			if m2, err := sub.ReceiveMessage(ctx); err != nil || m2.Payload != "marker" {
				t.Fatalf("release %d: after the notification %v, %v; want only the marker", i, m2, err)
			}
		}
		return m.Payload
	}
	for i, flush := range []bool{true, false} {
		mustAcquire(t, d, "k", "a")
		mustWaitFor(t, d, "k")
		if flush {
			if err := m.lose(ctx, rdb); err != nil {
				t.Fatal(err)
			}
		}
		mustRelease(t, d, "k", "a")
		if p := next(i); p != "" {
			t.Fatalf("release %d: no notification before the marker (got %q)", i, p)
		}
		if n := rdb.Exists(ctx, d.lockKey("k")).Val(); n != 0 {
			t.Fatalf("release %d: the lock key still exists", i)
		}
		if res := release(t, d, "k", "a"); res != driver.AlreadyReleased {
			t.Fatalf("release %d repeated: %v", i, res)
		}
		if p := next(i); p != "marker" {
			t.Fatalf("release %d: the repeated release published (got %q first)", i, p)
		}
	}
}

// A release sent again after it succeeded answers AlreadyReleased — also
// while another owner holds the lock, which it took after that release,
// and after that owner released it too (its record is kept under a key of
// its own, "<lock>:r:<id>" SEP, when a later release takes :last over).
func TestRepeatedReleaseIsRecognised(t *testing.T) {
	srv := redisserver.Start(t)
	d := newDriver(t, srv.Client(t))
	mustAcquire(t, d, "k", "a")
	mustRelease(t, d, "k", "a")
	if res := release(t, d, "k", "a"); res != driver.AlreadyReleased {
		t.Fatalf("repeated release: %v; want AlreadyReleased", res)
	}
	mustAcquire(t, d, "k", "b")
	if res := release(t, d, "k", "a"); res != driver.AlreadyReleased {
		t.Fatalf("repeated release while another owner holds the lock: %v; want AlreadyReleased", res)
	}
	mustRelease(t, d, "k", "b")
	if res := release(t, d, "k", "a"); res != driver.AlreadyReleased {
		t.Fatalf("repeated release after another owner released too: %v; want AlreadyReleased", res)
	}
	if res := release(t, d, "k", "c"); res != driver.NotHeld {
		t.Fatalf("release by a stranger: %v; want NotHeld", res)
	}
	// The kept record lasts as long as the lock had left, like :last.
	ttl, err := srv.Client(t).PTTL(context.Background(), "dlock:{k}:r:a"+sep).Result()
	if err != nil || ttl <= 0 {
		t.Errorf("the kept record of a's release: PTTL %v, %v; want the lock's remaining TTL", ttl, err)
	}
}

// ForceRelease frees the lock, returns the holder's token, wakes waiters
// and keeps the token on record, so the next token is greater; the broken
// holder's own release then answers NotHeld.
func TestForceRelease(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	woken := make(chan string, 4)
	w, err := d.Watch(func(k string) { woken <- k })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	tok := mustAcquire(t, d, "k", "a")
	got, ok, err := d.ForceRelease(ctx, "k")
	if err != nil || !ok || got != tok {
		t.Fatalf("ForceRelease: %d, %v, %v; want the holder's token %d", got, ok, err, tok)
	}
	select {
	case k := <-woken:
		if k != "k" {
			t.Fatalf("woken for %q", k)
		}
	case <-ctx.Done():
		t.Fatal("no notification of the forced release")
	}
	if ttl := rdb.PTTL(ctx, d.lastKey("k")).Val(); ttl <= 9*time.Second {
		t.Fatalf("the record of the broken lock has TTL %v, want the lock's remaining TTL", ttl)
	}
	if res := release(t, d, "k", "a"); res != driver.NotHeld {
		t.Fatalf("the broken holder's release: %v, want NotHeld", res)
	}
	// A token just above the clock would also be above the broken one; a
	// record ahead of the clock shows the record is what is used.
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := rdb.Set(ctx, d.lockKey("k"), fmt.Sprintf("b:%d:0:{}", ahead), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := d.ForceRelease(ctx, "k"); err != nil || !ok || got != ahead {
		t.Fatalf("ForceRelease: %d, %v, %v; want %d", got, ok, err, ahead)
	}
	if next := mustAcquire(t, d, "k", "c"); next != ahead+1 {
		t.Fatalf("token after the forced release %d, want %d", next, ahead+1)
	}
	mustRelease(t, d, "k", "c")
	if _, ok, err := d.ForceRelease(ctx, "k"); err != nil || ok {
		t.Fatalf("ForceRelease of a free lock: %v, %v", ok, err)
	}
}

// In Cluster mode a batch costs one script call per slot, the scripts
// publish, and waiters on any node hear it.
func TestClusterBatchesBySlot(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	c := newClusterClient(t, nodes)
	d := newDriver(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	keys := []string{"a", "b", "c", "d", "e", "f"}
	slots := make(map[uint16]bool)
	woken := make(chan string, len(keys))
	w, err := d.Watch(func(k string) { woken <- k })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var reqs []driver.ReleaseRequest
	var renews []driver.RenewRequest
	for _, k := range keys {
		slots[slot(d.lockKey(k))] = true
		mustAcquire(t, d, k, "id-"+k)
		mustWaitFor(t, d, k)
		if err := w.Add(ctx, k); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, driver.ReleaseRequest{Key: k, ID: "id-" + k})
		renews = append(renews, driver.RenewRequest{Key: k, ID: "id-" + k, TTL: time.Minute})
	}
	scriptCallsOnNodes := func() int {
		n := 0
		for _, s := range nodes {
			st := commandStats(t, s.Client(t))
			n += st["fcall"].calls + st["evalsha"].calls
		}
		return n
	}
	before := scriptCallsOnNodes()
	if held, err := d.Renew(ctx, renews); err != nil || len(held) != len(keys) || strings.Contains(fmt.Sprint(held), "false") {
		t.Fatalf("renew: %v, %v", held, err)
	}
	if n := scriptCallsOnNodes() - before; n != len(slots) {
		t.Errorf("renewal of %d keys in %d slots made %d script calls", len(keys), len(slots), n)
	}
	before = scriptCallsOnNodes()
	res, err := d.Release(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != driver.Released {
			t.Errorf("release of %q: %v", keys[i], r)
		}
	}
	// Every node has the library: the acquisitions loaded it.
	if n := scriptCallsOnNodes() - before; n != len(slots) {
		t.Errorf("release of %d keys in %d slots made %d script calls", len(keys), len(slots), n)
	}
	heard := make(map[string]bool)
	for len(heard) < len(keys) {
		select {
		case k := <-woken:
			heard[k] = true
		case <-ctx.Done():
			t.Fatalf("notified of %v only", heard)
		}
	}
}

// A lone release or renewal goes as one script call, without a pipeline;
// it too is sent again when the server lost the driver's code.
func TestLoneCallAfterScriptFlush(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := srv.Client(t)
			d := newDriver(t, rdb, m.opts...)
			ctx := context.Background()
			mustAcquire(t, d, "k", "a")
			if err := m.lose(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			before := commandStats(t, rdb)
			res, err := d.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "a", TTL: time.Minute}})
			if err != nil || len(res) != 1 || !res[0] {
				t.Fatalf("renew after the code was lost: %v, %v", res, err)
			}
			if got := callsSince(t, rdb, before); got[m.reload] != 1 {
				t.Fatalf("renew after the code was lost: calls %v, want the code sent again", got)
			}
			if err := m.lose(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			if got := release(t, d, "k", "a"); got != driver.Released {
				t.Fatalf("release after the code was lost: %v, want Released", got)
			}
		})
	}
}

// A release that grants the lock to a fair waiter wakes only that waiter
// (through its inbox): the name is held again, so nothing goes out on the
// release channel of plain Lock's waiters. That holds for the short
// hand-off, and for a grant made by settling the queue after the short
// hand-off gave up on a head whose place had expired.
func TestReleaseThatGrantsDoesNotPublishTheRelease(t *testing.T) {
	type waiter struct {
		id  string
		ttl time.Duration
	}
	for _, c := range []struct {
		name    string
		waiters []waiter // the first is granted at once
		next    string   // who gets the lock when the first releases
	}{
		{"hand-off", []waiter{{"a", time.Minute}, {"b", time.Minute}}, "b"},
		{"behind an expired head", []waiter{{"a", time.Minute}, {"dead", 300 * time.Millisecond}, {"c", time.Minute}}, "c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := srv.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d := newDriver(t, rdb)
			sub := rdb.Subscribe(ctx, d.channel("k"), d.inboxChannel("box"))
			defer sub.Close()
			for range 2 { // the subscription confirmations
				if _, err := sub.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for i, w := range c.waiters {
				res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: w.id, TTL: w.ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: "box"})
				if err != nil || res.Granted != (i == 0) {
					t.Fatalf("enqueue %s: %+v, %v", w.id, res, err)
				}
			}
			for _, w := range c.waiters[1:] {
				if w.ttl < time.Minute {
					waitPlacesExpired(t, rdb, d, "k", w.id)
				}
			}
			mustRelease(t, d, "k", c.waiters[0].id)
			if v := rdb.Get(ctx, d.lockKey("k")).Val(); !strings.HasPrefix(v, c.next+sep) {
				t.Fatalf("after the release the lock is %q; want %s's", v, c.next)
			}
			if err := rdb.Publish(ctx, d.channel("k"), "marker").Err(); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{d.inboxChannel("box"), d.channel("k")} {
				m, err := sub.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Channel != want || (want == d.channel("k") && m.Payload != "marker") {
					t.Fatalf("message %+v; want the grant on the inbox, then only the marker", m)
				}
			}
		})
	}
}

// A release publishes only a name a plain waiter asked for (note_waiting
// in lib.lua): one nobody waited for costs no PUBLISH, and the mark a
// waiter leaves expires by itself.
func TestReleasePublishesOnlyWhenWaitedFor(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := redisserver.NewClient(t, srv.Addr())
	d := newDriver(t, rdb)
	ctx := context.Background()
	publishes := func(wait bool) int {
		t.Helper()
		mustAcquireTTL(t, d, "k", "a", 200*time.Millisecond)
		if wait {
			mustWaitFor(t, d, "k")
		}
		before := commandStats(t, rdb)
		mustRelease(t, d, "k", "a")
		return callsSince(t, rdb, before)["publish"]
	}
	if n := publishes(false); n != 0 {
		t.Errorf("release nobody waited for: %d PUBLISH, want none", n)
	}
	if n := publishes(true); n != 1 {
		t.Errorf("release a waiter asked for: %d PUBLISH, want 1", n)
	}
	mark := d.lockKey("k") + waitingSuffix
	if pttl := rdb.PTTL(ctx, mark).Val(); pttl <= 0 || pttl > 10*time.Second+200*time.Millisecond {
		t.Errorf("the waiting mark's TTL is %v, want at most the holder's TTL left plus the waiter's", pttl)
	}
}

// A release keeps the record of the release before it for that one's
// retry, unless its request names it Settled (no retry can come).
func TestReleaseKeepsNoRecordOfASettledRelease(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := redisserver.NewClient(t, srv.Addr())
	d := newDriver(t, rdb)
	ctx := context.Background()
	records := func() []string {
		t.Helper()
		keys, err := rdb.Keys(ctx, d.lockKey("k")+":r:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	cycle := func(id, settled string) {
		t.Helper()
		mustAcquire(t, d, "k", id)
		res, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "k", ID: id, Settled: settled}})
		if err != nil || res[0] != driver.Released {
			t.Fatalf("release of %s: %v, %v", id, res, err)
		}
	}
	cycle("a", "")
	cycle("b", "")
	if got := records(); len(got) != 1 {
		t.Fatalf("after a's and b's releases, records %q, want a's", got)
	}
	if got := release(t, d, "k", "a"); got != driver.AlreadyReleased {
		t.Errorf("a retry of a's release after b's: %v, want AlreadyReleased", got)
	}
	cycle("c", "b")
	if got := records(); len(got) != 1 {
		t.Errorf("c's release named b's settled, records %q, want a's only", got)
	}
}

package drivertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// queueTests is the Queue group: the promises of driver.Queuer, run on
// every driver that implements it (skipped on the others).
var queueTests = []subtest{
	{"FIFO", testQueueFIFO, true},
	{"NoOvertake", testQueueNoOvertake, true},
	{"DeadWaiter", testQueueDeadWaiter, true},
	{"Cancel", testQueueCancel, true},
	{"HolderExpiry", testQueueHolderExpiry, true},
	{"Shared", testQueueShared, true},
	{"Permits", testQueuePermits, true},
	{"GrantTTL", testQueueGrantTTL, true},
	{"SinceIsGrant", testQueueSinceIsGrant, true},
	{"ForceReleaseGrantsHead", testQueueForceReleaseGrantsHead, true},
	{"LastHolderWakesWatchers", testQueueLastHolderWakesWatchers, true},
	{"Inspect", testQueueInspect, true},
	{"BadInput", testQueueBadInput, true},
	{"AcquireAll", testQueueAcquireAll, true},
	{"PermitLimit", testQueuePermitLimit, true},
	{"MaxWaiters", testQueueMaxWaiters, true},
	{"Batch", testQueueBatch, true},
}

// qenv is an env with the driver's Queuer and one grant inbox.
type qenv struct {
	*env
	q      driver.Queuer
	inbox  string
	grants *grantLog
}

// inspectQueue is the driver's Inspector.InspectQueue of key; the test
// is skipped on a driver that has no Inspector.
func (e *qenv) inspectQueue(key string) (driver.QueueInfo, bool, error) {
	e.t.Helper()
	ins, ok := e.d.(driver.Inspector)
	if !ok {
		e.t.Skip("driver does not implement driver.Inspector")
	}
	return ins.InspectQueue(e.ctx, key)
}

// grantLog records the grants announced on an inbox.
type grantLog struct {
	mu     sync.Mutex
	got    []driver.Grant
	signal chan struct{}
}

func (g *grantLog) onGrant(gr driver.Grant) {
	g.mu.Lock()
	g.got = append(g.got, gr)
	g.mu.Unlock()
	select {
	case g.signal <- struct{}{}:
	default:
	}
}

// waitFor waits until id's grant was announced and returns it.
func (g *grantLog) waitFor(id string, timeout time.Duration) (driver.Grant, bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		g.mu.Lock()
		for _, gr := range g.got {
			if gr.ID == id {
				g.mu.Unlock()
				return gr, true
			}
		}
		g.mu.Unlock()
		select {
		case <-g.signal:
		case <-timer.C:
			return driver.Grant{}, false
		}
	}
}

func (g *grantLog) announced(id string) bool {
	_, ok := g.waitFor(id, 0)
	return ok
}

func newQEnv(t *testing.T, h Harness) *qenv {
	t.Helper()
	e := newEnv(t, h)
	q, ok := e.d.(driver.Queuer)
	if !ok {
		t.Skip("driver does not implement driver.Queuer")
	}
	qe := &qenv{env: e, q: q, inbox: newID(), grants: &grantLog{signal: make(chan struct{}, 1)}}
	gw, err := q.WatchGrants(e.ctx, qe.inbox, qe.grants.onGrant)
	if err != nil {
		t.Fatalf("WatchGrants: %v", err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	return qe
}

func (e *qenv) qreq(key, id string, mode driver.Mode, limit int, wait bool, ttl time.Duration) driver.QueueRequest {
	return driver.QueueRequest{Key: key, ID: id, TTL: ttl, Owner: e.owner(), Mode: mode, Limit: limit, Wait: wait, Inbox: e.inbox}
}

func (e *qenv) enqueue(req driver.QueueRequest) driver.QueueResult {
	e.t.Helper()
	res, err := e.q.Enqueue(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Enqueue(%q, %v, id %s): %v", req.Key, req.Mode, req.ID, err)
	}
	return res
}

// granted enqueues a new request that must be granted at once.
func (e *qenv) granted(key string, mode driver.Mode, limit int) lease {
	e.t.Helper()
	id := newID()
	res := e.enqueue(e.qreq(key, id, mode, limit, true, e.ttl(longTTL)))
	if !res.Granted {
		e.t.Fatalf("Enqueue(%q, %v) on a name it fits: not granted (queued %v)", key, mode, res.Queued)
	}
	return lease{key, id, res.Token}
}

// queued enqueues a new waiting request that must be queued.
func (e *qenv) queued(key string, mode driver.Mode, limit int, ttl time.Duration) lease {
	e.t.Helper()
	id := newID()
	res := e.enqueue(e.qreq(key, id, mode, limit, true, ttl))
	if res.Granted || !res.Queued {
		e.t.Fatalf("Enqueue(%q, %v) behind others: granted %v, queued %v; want queued", key, mode, res.Granted, res.Queued)
	}
	return lease{key, id, 0}
}

func (e *qenv) releaseKind(kind driver.Kind, l lease) driver.ReleaseResult {
	e.t.Helper()
	return e.release(driver.ReleaseRequest{Kind: kind, Key: l.key, ID: l.id})[0]
}

func (e *qenv) renewKind(kind driver.Kind, l lease, ttl time.Duration) bool {
	e.t.Helper()
	return e.renew([]driver.RenewRequest{{Kind: kind, Key: l.key, ID: l.id, TTL: ttl}})[0]
}

// takeGrant waits for w's grant announcement and checks that the waiter's
// renewal now answers false and that Enqueue with its id reports the same
// grant, as the engine does.
func (e *qenv) takeGrant(w lease, mode driver.Mode, limit int) lease {
	e.t.Helper()
	g, ok := e.grants.waitFor(w.id, e.wait)
	if !ok {
		e.t.Fatalf("no grant announced for waiter %s of %q within %v", w.id, w.key, e.wait)
	}
	if g.Key != w.key {
		e.t.Errorf("grant announced for key %q, want %q", g.Key, w.key)
	}
	if e.renewKind(driver.KindWaiter, w, e.ttl(longTTL)) {
		e.t.Errorf("Renew of a granted waiter's place: true, want false")
	}
	res := e.enqueue(e.qreq(w.key, w.id, mode, limit, true, e.ttl(longTTL)))
	if !res.Granted || res.Token != g.Token {
		e.t.Errorf("Enqueue by a granted waiter: granted %v token %d, want the announced token %d", res.Granted, res.Token, g.Token)
	}
	return lease{w.key, w.id, g.Token}
}

// testQueueFIFO: exclusive waiters are granted one by one in arrival
// order, each by the previous holder's release, with increasing tokens
// from the plain lock's sequence; only the head is announced.
func testQueueFIFO(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("fifo")
	plain := e.acquire(key, e.ttl(longTTL)) // a plain holder: the queue hands off its release too
	ws := make([]lease, 5)
	for i := range ws {
		ws[i] = e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	}
	e.releaseOne(plain, driver.Released)
	prev := plain.token
	for i, w := range ws {
		got := e.takeGrant(w, driver.ModeExclusive, 0)
		if got.token <= prev {
			t.Errorf("grant %d: token %d not above the previous holder's %d", i, got.token, prev)
		}
		prev = got.token
		for _, later := range ws[i+1:] {
			if e.grants.announced(later.id) {
				t.Fatalf("waiter behind the head announced granted while the head holds")
			}
			if !e.renewKind(driver.KindWaiter, later, e.ttl(longTTL)) {
				t.Fatalf("Renew of a waiting place: false, want true")
			}
		}
		e.busy(key)
		if r := e.releaseKind(driver.KindLock, got); r != driver.Released {
			t.Fatalf("Release of grant %d: %s", i, resultName(r))
		}
	}
	free := e.acquire(key, e.ttl(longTTL))
	if free.token <= prev {
		t.Errorf("plain Acquire after the queue: token %d not above %d", free.token, prev)
	}
	e.releaseOne(free, driver.Released)
}

// testQueueNoOvertake: while a waiter waits, neither Acquire nor a
// non-waiting Enqueue takes the name, and a non-waiting Enqueue is not
// queued.
func testQueueNoOvertake(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("overtake")
	holder := e.granted(key, driver.ModeExclusive, 0)
	w := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	e.releaseOne(holder, driver.Released)
	got := e.takeGrant(w, driver.ModeExclusive, 0)
	w2 := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	e.releaseKind(driver.KindLock, got)
	// w2 is granted now; nobody else may take the name.
	e.busy(key)
	res := e.enqueue(e.qreq(key, newID(), driver.ModeExclusive, 0, false, e.ttl(longTTL)))
	if res.Granted || res.Queued {
		t.Errorf("non-waiting Enqueue on a held name: granted %v queued %v, want refused", res.Granted, res.Queued)
	}
	g := e.takeGrant(w2, driver.ModeExclusive, 0)
	// A waiter queued behind a holder keeps plain Acquire out even after the
	// holder's release grants it: the grant happened in the same step.
	if r := e.releaseKind(driver.KindLock, g); r != driver.Released {
		t.Fatalf("Release: %s", resultName(r))
	}
	l := e.acquire(key, e.ttl(longTTL))
	e.releaseOne(l, driver.Released)
}

// testQueueDeadWaiter: a waiter that stops renewing drops out within its
// TTL; the release then grants the live waiter behind it.
func testQueueDeadWaiter(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("dead")
	holder := e.granted(key, driver.ModeExclusive, 0)
	short := e.ttl(300 * time.Millisecond)
	dead := e.queued(key, driver.ModeExclusive, 0, short)
	live := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	time.Sleep(short + 20*time.Millisecond) // the dead waiter's place runs out
	if e.renewKind(driver.KindWaiter, dead, e.ttl(longTTL)) {
		t.Errorf("Renew of a place past its TTL: true, want false")
	}
	e.releaseKind(driver.KindLock, holder)
	got := e.takeGrant(live, driver.ModeExclusive, 0)
	if e.grants.announced(dead.id) {
		t.Errorf("an expired waiter was granted")
	}
	e.releaseKind(driver.KindLock, got)
}

// testQueueCancel: releasing a waiting place removes it; releasing the
// place of a waiter granted meanwhile releases the grant, for the next.
func testQueueCancel(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("cancel")
	holder := e.granted(key, driver.ModeExclusive, 0)
	gone := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	raced := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	next := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	if r := e.releaseKind(driver.KindWaiter, gone); r != driver.Released {
		t.Errorf("Release of a waiting place: %s, want Released", resultName(r))
	}
	if r := e.releaseKind(driver.KindWaiter, gone); r != driver.AlreadyReleased {
		t.Errorf("repeated Release of a place: %s, want AlreadyReleased", resultName(r))
	}
	e.releaseKind(driver.KindLock, holder)
	if _, ok := e.grants.waitFor(raced.id, e.wait); !ok {
		t.Fatalf("no grant for the waiter behind the cancelled one")
	}
	// The waiter gives up after its grant: its place's release frees it.
	if r := e.releaseKind(driver.KindWaiter, raced); r != driver.Released {
		t.Errorf("Release of a granted waiter's place: %s, want Released", resultName(r))
	}
	got := e.takeGrant(next, driver.ModeExclusive, 0)
	e.releaseKind(driver.KindLock, got)
}

// testQueueHolderExpiry: a holder that stops renewing expires; the head
// waiter's next request (its renewal or poke) takes the name over, with a
// greater token, within the holder's TTL.
func testQueueHolderExpiry(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("expiry")
	short := e.ttl(300 * time.Millisecond)
	id := newID()
	res := e.enqueue(e.qreq(key, id, driver.ModeExclusive, 0, true, short))
	if !res.Granted {
		t.Fatal("first Enqueue not granted")
	}
	w := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	again := e.enqueue(e.qreq(key, w.id, driver.ModeExclusive, 0, true, e.ttl(longTTL)))
	if !again.Queued || again.RetryAfter < 0 || again.RetryAfter > short {
		t.Errorf("head waiter's poke: queued %v RetryAfter %v, want queued with at most %v", again.Queued, again.RetryAfter, short)
	}
	time.Sleep(short + 20*time.Millisecond)
	poke := e.enqueue(e.qreq(key, w.id, driver.ModeExclusive, 0, true, e.ttl(longTTL)))
	if !poke.Granted || poke.Token <= res.Token {
		t.Fatalf("head waiter after the holder expired: granted %v token %d, want a grant above %d", poke.Granted, poke.Token, res.Token)
	}
	e.releaseKind(driver.KindLock, lease{key, w.id, poke.Token})
}

// testQueueShared: readers share; a writer waits for them; a reader that
// arrives after the writer does not overtake it; reader tokens are
// exclusive epochs.
func testQueueShared(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("shared")
	w0 := e.granted(key, driver.ModeExclusive, 0)
	e.releaseKind(driver.KindLock, w0)
	r1 := e.granted(key, driver.ModeShared, 0)
	r2 := e.granted(key, driver.ModeShared, 0)
	for _, r := range []lease{r1, r2} {
		if r.token < w0.token {
			t.Errorf("reader token %d below the earlier writer's %d", r.token, w0.token)
		}
	}
	e.busy(key)
	writer := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	late := e.queued(key, driver.ModeShared, 0, e.ttl(longTTL))
	if !e.renewKind(driver.KindRead, r1, e.ttl(longTTL)) {
		t.Errorf("Renew of a reader: false")
	}
	if e.renewKind(driver.KindPermit, r1, e.ttl(longTTL)) || e.renewKind(driver.KindLock, r1, e.ttl(longTTL)) {
		t.Errorf("Renew of a reader as another kind: true")
	}
	if r := e.releaseKind(driver.KindRead, r1); r != driver.Released {
		t.Errorf("Release of a reader: %s", resultName(r))
	}
	if e.grants.announced(writer.id) {
		t.Fatal("writer granted while a reader holds")
	}
	e.releaseKind(driver.KindRead, r2)
	wg := e.takeGrant(writer, driver.ModeExclusive, 0)
	for _, r := range []lease{r1, r2} {
		if wg.token <= r.token {
			t.Errorf("writer token %d not above the earlier reader's %d", wg.token, r.token)
		}
	}
	if e.grants.announced(late.id) {
		t.Fatal("reader granted while the writer holds")
	}
	e.releaseKind(driver.KindLock, wg)
	rg := e.takeGrant(late, driver.ModeShared, 0)
	if rg.token < wg.token {
		t.Errorf("reader after the writer: token %d below the writer's %d", rg.token, wg.token)
	}
	e.releaseKind(driver.KindRead, rg)
}

// testQueuePermits: at most Limit permits are held; a release grants the
// next; only the holder's release counts, and a retry answers
// AlreadyReleased.
func testQueuePermits(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("permits")
	p1 := e.granted(key, driver.ModePermit, 2)
	p2 := e.granted(key, driver.ModePermit, 2)
	p3 := e.queued(key, driver.ModePermit, 2, e.ttl(longTTL))
	if r := e.releaseKind(driver.KindPermit, lease{key, newID(), 0}); r != driver.NotHeld {
		t.Errorf("Release of a permit by a stranger: %s, want NotHeld", resultName(r))
	}
	if e.grants.announced(p3.id) {
		t.Fatal("third permit granted with a limit of 2")
	}
	if r := e.releaseKind(driver.KindPermit, p1); r != driver.Released {
		t.Errorf("Release of a permit: %s", resultName(r))
	}
	if r := e.releaseKind(driver.KindPermit, p1); r != driver.AlreadyReleased {
		t.Errorf("repeated Release of a permit: %s, want AlreadyReleased", resultName(r))
	}
	g3 := e.takeGrant(p3, driver.ModePermit, 2)
	res := e.enqueue(e.qreq(key, newID(), driver.ModePermit, 2, false, e.ttl(longTTL)))
	if res.Granted {
		t.Errorf("third permit granted with a limit of 2")
	}
	if !e.renewKind(driver.KindPermit, p2, e.ttl(longTTL)) || !e.renewKind(driver.KindPermit, g3, e.ttl(longTTL)) {
		t.Errorf("held permits not renewable")
	}
	e.busy(key)
	e.releaseKind(driver.KindPermit, p2)
	e.releaseKind(driver.KindPermit, g3)
	l := e.acquire(key, e.ttl(longTTL))
	e.releaseOne(l, driver.Released)
}

// testQueueGrantTTL: a granted waiter's lease keeps what its place had
// left, never a fresh TTL it did not ask for after the grant.
func testQueueGrantTTL(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("grantttl")
	holder := e.granted(key, driver.ModeExclusive, 0)
	ttl := e.ttl(2 * time.Second)
	w := e.queued(key, driver.ModeExclusive, 0, ttl)
	queuedAt := time.Now() // after the place's TTL started in the store
	time.Sleep(300 * time.Millisecond)
	e.releaseKind(driver.KindLock, holder)
	if _, ok := e.grants.waitFor(w.id, e.wait); !ok {
		t.Fatal("no grant")
	}
	elapsed := time.Since(queuedAt) // before the store answers InspectQueue
	info, ok, err := e.inspectQueue(key)
	if err != nil || !ok || len(info.Holders) != 1 {
		t.Fatalf("InspectQueue: %+v %v %v", info, ok, err)
	}
	if left, bound := info.Holders[0].TTL, ttl-elapsed+e.caps.TTLUnit; left > bound {
		t.Errorf("granted lease has %v left, more than its place had (%v)", left, bound)
	}
	if info.Holders[0].ID != w.id || info.Holders[0].Mode != driver.ModeExclusive {
		t.Errorf("InspectQueue holder %+v, want the granted waiter", info.Holders[0])
	}
	e.releaseKind(driver.KindWaiter, w)
}

// testQueueInspect: InspectQueue shows holders and waiters in order.
func testQueueInspect(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("inspect")
	if _, ok, err := e.inspectQueue(key); err != nil || ok {
		t.Errorf("InspectQueue of an unused name: ok %v err %v", ok, err)
	}
	r := e.granted(key, driver.ModeShared, 0)
	w1 := e.queued(key, driver.ModeExclusive, 0, e.ttl(longTTL))
	w2 := e.queued(key, driver.ModeShared, 0, e.ttl(longTTL))
	info, ok, err := e.inspectQueue(key)
	if err != nil || !ok {
		t.Fatalf("InspectQueue: ok %v err %v", ok, err)
	}
	if len(info.Holders) != 1 || info.Holders[0].ID != r.id || info.Holders[0].Mode != driver.ModeShared ||
		info.Holders[0].Owner != e.owner() || info.Holders[0].TTL <= 0 {
		t.Errorf("holders %+v, want the reader", info.Holders)
	}
	if len(info.Waiters) != 2 || info.Waiters[0].ID != w1.id || info.Waiters[1].ID != w2.id ||
		info.Waiters[0].Mode != driver.ModeExclusive || info.Waiters[0].Owner != e.owner() {
		t.Errorf("waiters %+v, want the writer then the reader", info.Waiters)
	}
	for _, l := range []lease{w1, w2} {
		e.releaseKind(driver.KindWaiter, l)
	}
	e.releaseKind(driver.KindRead, r)
	if _, ok, err := e.inspectQueue(key); err != nil || ok {
		t.Errorf("InspectQueue after everyone left: ok %v err %v", ok, err)
	}
}

// testQueueBadInput: malformed requests are refused with ErrInvalid.
func testQueueBadInput(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	key := e.key("bad")
	ttl := e.ttl(longTTL)
	for name, req := range map[string]driver.QueueRequest{
		"no mode":        {Key: key, ID: newID(), TTL: ttl},
		"unknown mode":   {Key: key, ID: newID(), TTL: ttl, Mode: 99},
		"permit limit 0": {Key: key, ID: newID(), TTL: ttl, Mode: driver.ModePermit},
		"wait, no inbox": {Key: key, ID: newID(), TTL: ttl, Mode: driver.ModeExclusive, Wait: true},
		"empty id":       {Key: key, TTL: ttl, Mode: driver.ModeExclusive},
		"max waiters -1": {Key: key, ID: newID(), TTL: ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: e.inbox, MaxWaiters: -1},
	} {
		if _, err := e.q.Enqueue(e.ctx, req); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("Enqueue with %s: %v, want an error matching driver.ErrInvalid", name, err)
		}
	}
	if _, err := e.q.WatchGrants(e.ctx, e.inbox, nil); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("WatchGrants with a nil callback: %v, want ErrInvalid", err)
	}
	if _, ok, _ := e.inspectQueue(key); ok {
		t.Errorf("a refused request left something in the queue")
	}
}

// testQueueAcquireAll: a multi-lock acquisition (driver.MultiAcquirer)
// refuses a name held by a reader or with waiters, as Acquire does, takes
// nothing then, and takes the name once it is free (a remembered release
// does not keep it busy).
func testQueueAcquireAll(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	ma, ok := e.d.(driver.MultiAcquirer)
	if !ok {
		t.Skip("driver does not implement driver.MultiAcquirer")
	}
	// One hash tag, so that a Cluster takes both in one step.
	a, b := "{"+e.key("all")+"}:a", "{"+e.key("all")+"}:b"
	if !ma.Atomic([]string{a, b}) {
		t.Skip("the driver cannot take these keys atomically")
	}
	reqs := func() []driver.AcquireRequest {
		return []driver.AcquireRequest{e.req(a, newID(), e.ttl(longTTL)), e.req(b, newID(), e.ttl(longTTL))}
	}
	r := e.granted(a, driver.ModeShared, 0)
	res, err := ma.AcquireAll(e.ctx, reqs())
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquired || res.Busy != 0 {
		t.Fatalf("AcquireAll over a reader's name: acquired %v busy %d, want busy 0", res.Acquired, res.Busy)
	}
	lb := e.acquire(b, e.ttl(longTTL)) // the refused request took nothing
	e.releaseOne(lb, driver.Released)
	e.releaseKind(driver.KindRead, r)
	res, err = ma.AcquireAll(e.ctx, reqs())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Acquired || len(res.Tokens) != 2 {
		t.Fatalf("AcquireAll once the reader left: %+v, want acquired", res)
	}
}

// testQueueBatch: a QueueBatcher answers every request of a batch as
// Enqueue would, in order: a free name granted, the same name then queued
// behind it, a bad request refused alone (driver.ErrInvalid); and the one
// granted holds the name. Skipped for a Queuer that does not batch.
func testQueueBatch(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	qb, ok := e.q.(driver.QueueBatcher)
	if !ok {
		t.Skip("the driver is no QueueBatcher")
	}
	key, other := e.key("batch"), e.key("batch-other")
	ttl := e.ttl(longTTL)
	first, second, third := newID(), newID(), newID()
	reqs := []driver.QueueRequest{
		{Key: key, ID: first, TTL: ttl, Mode: driver.ModeExclusive},
		{Key: key, ID: second, TTL: ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: e.inbox},
		{Key: key, TTL: ttl, Mode: driver.ModeExclusive}, // no id
		{Key: other, ID: third, TTL: ttl, Mode: driver.ModeExclusive},
	}
	res, errs := qb.EnqueueBatch(e.ctx, reqs)
	if len(res) != len(reqs) || len(errs) != len(reqs) {
		t.Fatalf("EnqueueBatch of %d: %d results, %d errors", len(reqs), len(res), len(errs))
	}
	if errs[0] != nil || !res[0].Granted || res[0].Token == 0 {
		t.Errorf("first request of a free name: %+v, %v; want granted", res[0], errs[0])
	}
	if errs[1] != nil || !res[1].Queued {
		t.Errorf("second request of the same name, waiting: %+v, %v; want queued", res[1], errs[1])
	}
	if !errors.Is(errs[2], driver.ErrInvalid) {
		t.Errorf("request without an id: %v, want an error matching driver.ErrInvalid", errs[2])
	}
	if errs[3] != nil || !res[3].Granted {
		t.Errorf("request of another free name: %+v, %v; want granted", res[3], errs[3])
	}
	if r := e.try(e.req(key, newID(), ttl)); r.Acquired {
		t.Errorf("Acquire of a name the batch granted: acquired")
	}
}

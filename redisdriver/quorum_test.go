package redisdriver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// waitUptime waits until every server has been up for secs whole seconds,
// so that a Quorum with the default restart delay lets it vote on requests
// with a TTL up to that.
func waitUptime(t *testing.T, srvs []*redisserver.Server, secs int64) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(secs)*time.Second + 10*time.Second)
	for _, s := range srvs {
		c := s.Client(t)
		for {
			info, err := c.Info(context.Background(), "server").Result()
			if err != nil {
				t.Fatal(err)
			}
			if _, up, err := parseServerInfo(info); err != nil {
				t.Fatal(err)
			} else if up >= secs {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not up for %d s", s.Addr(), secs)
			}
			time.Sleep(50 * time.Millisecond) // polls the server's uptime
		}
	}
}

// quorumClient returns a dlock Client on q, closed with the test.
func quorumClient(t *testing.T, q *Quorum, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.New(q, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		_ = q.Close()
	})
	return c
}

// cycle takes and releases key once and returns the token.
func cycle(t *testing.T, c *dlock.Client, key string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q): %v", key, err)
	}
	return l.Token()
}

// Five masters: with two killed (kill -9) locks go on, tokens increasing;
// with a third killed, a held lease ends before its keys on the surviving
// masters can expire, and new locks fail at once with ErrBackend
// (ErrNoQuorum).
func TestQuorumKilledMasters(t *testing.T) {
	srvs := startMasters(t, 5)
	const ttl = time.Second
	waitUptime(t, srvs, 1)
	c := quorumClient(t, newQuorum(t, srvs), dlock.WithDefaultTTL(ttl))
	last := cycle(t, c, "k")

	srvs[0].Kill()
	srvs[1].Kill()
	for range 20 {
		tok := cycle(t, c, "k")
		if tok <= last {
			t.Fatalf("token %d after %d with 2 of 5 masters killed: want increasing", tok, last)
		}
		last = tok
	}

	ctx := context.Background()
	held, err := c.Lock(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	// The earliest moment any surviving master's key can expire: renewals
	// of the surviving minority only push it later.
	srvs[2].Kill()
	expiry := time.Time{}
	for _, s := range srvs[3:] {
		c := s.Client(t)
		at := time.Now() // the server reads its clock after this
		pttl, err := c.PTTL(ctx, "dlock:{held}").Result()
		if err != nil || pttl <= 0 {
			t.Fatalf("PTTL of the held lock on %s: %v, %v", s.Addr(), pttl, err)
		}
		if e := at.Add(pttl); expiry.IsZero() || e.Before(expiry) {
			expiry = e
		}
	}
	<-held.Done()
	// The lease ends at its validity deadline: renewals fail (ErrNoQuorum)
	// and it is not moved.
	if end := held.Deadline(); !end.Before(expiry) {
		t.Errorf("lease ended %v after its first key could expire", end.Sub(expiry))
	}
	if err := held.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("lost lease's Err = %v, want ErrLockLost", err)
	}

	_, err = c.TryLock(ctx, "new")
	if !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, ErrNoQuorum) {
		t.Errorf("TryLock with 2 of 5 masters: %v, want ErrBackend and ErrNoQuorum", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Lock(lctx, "new"); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("Lock with 2 of 5 masters: %v, want ErrBackend", err)
	}
}

// Two of five masters behind proxies that stop answering (blackhole), then
// refuse connections: locks go on with increasing tokens, and the holder
// excludes a rival throughout.
func TestQuorumPartitionedMinority(t *testing.T) {
	srvs := startMasters(t, 5)
	waitUptime(t, srvs, 1)
	proxies := []*redisserver.Proxy{redisserver.NewProxy(t, srvs[0].Addr()), redisserver.NewProxy(t, srvs[1].Addr())}
	clients := func() []redis.UniversalClient {
		cs := []redis.UniversalClient{}
		for _, p := range proxies {
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			cs = append(cs, rdb)
		}
		for _, s := range srvs[2:] {
			cs = append(cs, s.Client(t))
		}
		return cs
	}
	newClient := func() *dlock.Client {
		q, err := NewQuorum(clients(), WithVoteTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return quorumClient(t, q, dlock.WithDefaultTTL(time.Second))
	}
	a, b := newClient(), newClient()
	last := cycle(t, a, "k")
	for _, fault := range []func(p *redisserver.Proxy, on bool){(*redisserver.Proxy).Blackhole, (*redisserver.Proxy).Refuse} {
		for _, p := range proxies {
			fault(p, true)
		}
		for range 5 {
			ctx := context.Background()
			l, err := a.Lock(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last {
				t.Fatalf("token %d after %d with a minority partitioned", l.Token(), last)
			}
			last = l.Token()
			if rival, err := b.TryLock(ctx, "k"); err == nil || !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("rival's TryLock while held: %v, %v", rival, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range proxies {
			fault(p, false)
		}
	}
}

// A master restarted empty stays out of votes for the request's TTL (by
// default): a rival cannot make a majority of it and a master that never
// held the lock while the holder still believes it holds it; with
// WithRestartDelay(0) it can (the hole the delay closes). Tokens issued
// after the restart still exceed the holder's.
func TestQuorumRestartedMaster(t *testing.T) {
	srvs := startMasters(t, 3)
	const ttl = 2 * time.Second
	waitUptime(t, srvs, 2)
	ctx := context.Background()
	holder := newQuorum(t, srvs)
	t.Cleanup(func() { _ = holder.Close() })
	req := driver.AcquireRequest{Key: "k", ID: "holder", TTL: ttl}
	a, err := holder.Acquire(ctx, req)
	if err != nil || !a.Acquired {
		t.Fatalf("holder's Acquire: %+v, %v", a, err)
	}
	// Keep the third master's copy from counting: the holder's majority
	// is masters 0 and 1, and master 0 loses its data.
	if err := srvs[2].Client(t).Del(ctx, "dlock:{k}").Err(); err != nil {
		t.Fatal(err)
	}
	srvs[0].RestartEmpty()

	rival := newQuorum(t, srvs)
	t.Cleanup(func() { _ = rival.Close() })
	r, err := rival.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "rival", TTL: ttl})
	if err == nil && r.Acquired {
		t.Fatalf("rival acquired (token %d) while the holder's lease (token %d) is valid", r.Token, a.Token)
	}
	if err != nil {
		t.Errorf("rival's Acquire with the restarted master out: %v, want busy (2 of 3 answered)", err)
	}

	hole := newQuorum(t, srvs, WithRestartDelay(0))
	t.Cleanup(func() { _ = hole.Close() })
	h, err := hole.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "hole", TTL: ttl})
	if err != nil || !h.Acquired {
		t.Fatalf("without the restart delay: %+v, %v; want the second holder the delay prevents", h, err)
	}
	if h.Token <= a.Token {
		t.Errorf("token after an empty restart %d, holder's %d: want greater", h.Token, a.Token)
	}
	held, err := holder.Renew(ctx, []driver.RenewRequest{{Key: "k", ID: "holder", TTL: ttl}})
	if err != nil || held[0] {
		t.Errorf("holder's renewal after losing its majority: %v, %v; want not held", held, err)
	}
}

// When the masters issue different tokens (here, two whose last releases
// carry tokens far ahead of the proposal, and apart), the lease's token is
// the highest its majority issued, every master holding the lock records
// it before Acquire returns, and the next lease's token is greater.
func TestQuorumTokenWriteBack(t *testing.T) {
	srvs := startMasters(t, 3)
	ctx := context.Background()
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	for i, tok := range []uint64{ahead, ahead + 5} {
		last := "earlier:" + strconv.FormatUint(tok, 10) + ":0:{}"
		if err := srvs[i].Client(t).Set(ctx, "dlock:{k}:last", last, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	q := newQuorum(t, srvs, WithRestartDelay(0))
	t.Cleanup(func() { _ = q.Close() })
	req := driver.AcquireRequest{Key: "k", ID: "a", TTL: 10 * time.Second}
	res, err := q.Acquire(ctx, req)
	// Every majority has master 0 or 1, and tokens that differ.
	if err != nil || !res.Acquired || res.Token <= ahead {
		t.Fatalf("Acquire: %+v, %v; want acquired with a token above %d", res, err, ahead)
	}
	holders := 0
	for _, s := range srvs {
		v, err := s.Client(t).Get(ctx, "dlock:{k}").Result()
		if errors.Is(err, redis.Nil) {
			continue // a late grant, released
		}
		if err != nil {
			t.Fatal(err)
		}
		holders++
		if f := strings.Split(v, ":"); f[1] != strconv.FormatUint(res.Token, 10) {
			t.Errorf("%s records token %s, want %d", s.Addr(), f[1], res.Token)
		}
	}
	if holders < 2 {
		t.Errorf("%d masters hold the lock, want a majority", holders)
	}
	if r := quorumRelease(t, q, "k", "a"); r != driver.Released {
		t.Fatalf("release: %v", r)
	}
	next, err := q.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "b", TTL: time.Second})
	if err != nil || !next.Acquired || next.Token <= res.Token {
		t.Errorf("next Acquire: %+v, %v; want a token above %d", next, err, res.Token)
	}
}

func quorumRelease(t *testing.T, q *Quorum, key, id string) driver.ReleaseResult {
	t.Helper()
	res, err := q.Release(context.Background(), []driver.ReleaseRequest{{Key: key, ID: id}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// A holder that stops renewing (as a paused process does) past its TTL
// loses the lock to the next one, whose greater token the fenced resource
// (redisfence) then holds against the old holder's writes: none of them
// is accepted after the new holder's first.
func TestQuorumFencing(t *testing.T) {
	srvs := startMasters(t, 3)
	resource := redisserver.Start(t)
	fc, err := redisfence.New(resource.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := newQuorum(t, srvs, WithRestartDelay(0))
	c := quorumClient(t, q, dlock.WithDefaultTTL(time.Second))
	const ttl = 500 * time.Millisecond
	cycle(t, c, "warm-up") // connects, so that the vote below fits in TTL/4
	// The stalled holder: an acquisition nobody renews.
	old, err := q.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "stalled", TTL: ttl})
	if err != nil || !old.Acquired {
		t.Fatalf("Acquire: %+v, %v", old, err)
	}
	if err := fc.Set(ctx, "data", old.Token, "old", 0); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, "k") // waits for the stalled holder's expiry
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	if l.Token() <= old.Token {
		t.Fatalf("new holder's token %d, stalled holder's %d: want greater", l.Token(), old.Token)
	}
	if err := fc.Set(ctx, "data", l.Token(), "new", 0); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for range 10 {
		if err := fc.Set(ctx, "data", old.Token, "stale", 0); errors.Is(err, fence.ErrStaleToken) {
			stale++
		} else {
			t.Errorf("stalled holder's write: %v, want ErrStaleToken", err)
		}
	}
	if v, err := fc.Get(ctx, "data", l.Token()); err != nil || v != "new" {
		t.Errorf("data = %q, %v; want the new holder's", v, err)
	}
}

// The queue's primitives are refused with dlock.ErrUnsupported: a quorum
// has no queue, and Lock waits the plain way.
func TestQuorumUnsupported(t *testing.T) {
	srvs := startMasters(t, 3)
	c := quorumClient(t, newQuorum(t, srvs, WithRestartDelay(0)))
	ctx := context.Background()
	if _, ok := any(&Quorum{}).(driver.Queuer); ok {
		t.Fatal("Quorum implements driver.Queuer")
	}
	if q := (&Quorum{}).Capabilities(); q.QueueByDefault {
		t.Error("QueueByDefault set without a queue")
	}
	calls := map[string]func() error{
		"Lock WithFIFO": func() error { _, err := c.Lock(ctx, "f", dlock.WithFIFO()); return err },
		"RWMutex.RLock": func() error { _, err := c.RWMutex("rw").RLock(ctx); return err },
		"RWMutex.Lock":  func() error { _, err := c.RWMutex("rw").Lock(ctx); return err },
		"Semaphore":     func() error { _, err := c.Semaphore("s", 2).Acquire(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, dlock.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	if tok := cycle(t, c, "plain"); tok == 0 {
		t.Error("plain Lock: token 0")
	}
}

// OpenQuorum: bad input is refused with ErrInvalidArgument; the Client
// locks on the URLs' masters and closes their clients.
func TestOpenQuorum(t *testing.T) {
	for _, urls := range [][]string{nil, {"redis+cluster://127.0.0.1:1,127.0.0.1:2"}, {"redis://127.0.0.1:1", "bogus://x"}} {
		if _, err := OpenQuorum(urls); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("OpenQuorum(%q): %v, want ErrInvalidArgument", urls, err)
		}
	}
	srvs := startMasters(t, 3)
	waitUptime(t, srvs, 1)
	urls := make([]string, len(srvs))
	for i, s := range srvs {
		urls[i] = "redis://" + s.Addr()
	}
	c, err := OpenQuorum(urls, dlock.WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	a := cycle(t, c, "k")
	if b := cycle(t, c, "k"); b <= a {
		t.Errorf("tokens %d then %d: want increasing", a, b)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// commandLog records the commands a client sends, by name.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		name := cmd.Name()
		for _, sc := range []*script{acquireScript, releaseScript} {
			if name == "evalsha" && cmd.Args()[1] == sc.sha {
				name = sc.name
			}
		}
		l.cmds = append(l.cmds, name)
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.mu.Lock()
		l.cmds = append(l.cmds, "pipeline")
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.cmds
	l.cmds = nil
	return out
}

// An uncontended Lock and Unlock on a quorum is one acquisition and one
// release on each master, and no restart check but after a new connection. (A token
// write-back may come on top, when a master's clock passed the proposal
// before the request reached it: a loaded machine.)
func TestQuorumRequestsPerCycle(t *testing.T) {
	srvs := startMasters(t, 3)
	logs := make([]*commandLog, len(srvs))
	clients := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		logs[i] = &commandLog{}
		c := s.Client(t)
		c.AddHook(logs[i])
		clients[i] = c
	}
	q, err := NewQuorum(clients, WithRestartDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	c := quorumClient(t, q, dlock.WithDefaultTTL(10*time.Second))
	cycle(t, c, "warm-up") // connects and loads the scripts
	q.calls.Wait()         // late answers of the warm-up
	for _, l := range logs {
		l.take()
	}
	const cycles = 20
	for range cycles {
		cycle(t, c, "k")
	}
	q.calls.Wait()
	for i, l := range logs {
		count := map[string]int{}
		for _, cmd := range l.take() {
			count[cmd]++
		}
		// A restart check (INFO) follows only a new connection (HELLO),
		// which a loaded machine may make go-redis open meanwhile.
		if count["acquire"] != cycles || count["release"] != cycles || count["info"] > count["hello"] {
			t.Errorf("master %d: %v for %d cycles, want %d acquisitions, %d releases, no INFO but after a new connection", i, count, cycles, cycles, cycles)
		}
	}
}

// Masters restarted empty after the Quorum last read their restart time
// do not vote: go-redis sends the acquisition again on a new connection
// when the pooled one broke, and the Quorum reads the restart time again
// before it counts such a grant.
func TestQuorumRestartBetweenVotes(t *testing.T) {
	srvs := startMasters(t, 3)
	const ttl = 2 * time.Second
	waitUptime(t, srvs, 2)
	ctx := context.Background()
	q := newQuorum(t, srvs)
	t.Cleanup(func() { _ = q.Close() })
	first, err := q.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "first", TTL: ttl})
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire: %+v, %v", first, err)
	}
	srvs[0].RestartEmpty()
	srvs[1].RestartEmpty()
	res, err := q.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "second", TTL: ttl})
	if res.Acquired {
		t.Fatalf("acquired (token %d) with two of three masters restarted an instant ago, the first lease (token %d) still valid",
			res.Token, first.Token)
	}
	if !errors.Is(err, ErrNoQuorum) {
		t.Errorf("Acquire with two masters out: %v, want ErrNoQuorum", err)
	}
}

// Bad input to NewQuorum and its options is refused with ErrInvalid.
func TestNewQuorumInvalid(t *testing.T) {
	srv := redisserver.Start(t)
	c := srv.Client(t)
	var nilClient *redis.Client
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	t.Cleanup(func() { _ = cluster.Close() })
	cases := map[string]func() (*Quorum, error){
		"no clients":     func() (*Quorum, error) { return NewQuorum(nil) },
		"65 clients":     func() (*Quorum, error) { return NewQuorum(make([]redis.UniversalClient, 65)) },
		"nil client":     func() (*Quorum, error) { return NewQuorum([]redis.UniversalClient{c, nilClient, c}) },
		"cluster client": func() (*Quorum, error) { return NewQuorum([]redis.UniversalClient{c, cluster, c}) },
		"nil option":     func() (*Quorum, error) { return NewQuorum([]redis.UniversalClient{c}, nil) },
		"vote timeout 0": func() (*Quorum, error) { return NewQuorum([]redis.UniversalClient{c}, WithVoteTimeout(0)) },
		"negative delay": func() (*Quorum, error) { return NewQuorum([]redis.UniversalClient{c}, WithRestartDelay(-time.Second)) },
		"prefix with brace": func() (*Quorum, error) {
			return NewQuorum([]redis.UniversalClient{c}, WithMasterOptions(WithPrefix("a{")))
		},
	}
	for name, newQuorum := range cases {
		if q, err := newQuorum(); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%s: %v, %v; want ErrInvalid", name, q, err)
		}
	}
}

// LockAll takes its locks one by one on a quorum (no MultiAcquirer), with
// tokens, and releases them all.
func TestQuorumLockAll(t *testing.T) {
	srvs := startMasters(t, 3)
	c := quorumClient(t, newQuorum(t, srvs, WithRestartDelay(0)), dlock.WithDefaultTTL(10*time.Second))
	ctx := context.Background()
	keys := []string{"b", "a", "c"}
	m, err := c.LockAll(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if m.Token(k) == 0 {
			t.Errorf("no token for %q", k)
		}
		if l, err := c.TryLock(ctx, k); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("TryLock(%q) under LockAll: %v, %v", k, l, err)
		}
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		cycle(t, c, k)
	}
}

// The operators' view is the majority's: a lock a minority of the masters
// hold (a vote that failed) is free, and one a majority holds is shown
// with the time its majority has left; with a majority of the masters
// gone, Inspect fails with ErrNoQuorum.
func TestQuorumInspectMajority(t *testing.T) {
	srvs := startMasters(t, 3)
	q := newQuorum(t, srvs, WithRestartDelay(0))
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	minority, err := New(srvs[0].Client(t))
	if err != nil {
		t.Fatal(err)
	}
	mustAcquireTTL(t, minority, "k", "minority", time.Minute)
	if info, ok, err := q.Inspect(ctx, "k"); err != nil || ok {
		t.Errorf("Inspect of a lock one master of three holds: %+v, %v, %v; want free", info, ok, err)
	}
	if infos, err := q.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Errorf("List with a lock one master of three holds: %+v, %v; want none", infos, err)
	}
	res, err := q.Acquire(ctx, driver.AcquireRequest{Key: "held", ID: "a", TTL: time.Minute})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	info, ok, err := q.Inspect(ctx, "held")
	if err != nil || !ok || info.Token != res.Token || info.TTL <= 0 || info.TTL > time.Minute {
		t.Errorf("Inspect of a held lock: %+v, %v, %v; want token %d and a TTL within a minute", info, ok, err, res.Token)
	}
	srvs[1].Kill()
	srvs[2].Kill()
	if _, _, err := q.Inspect(ctx, "held"); !errors.Is(err, ErrNoQuorum) {
		t.Errorf("Inspect with 1 of 3 masters: %v, want ErrNoQuorum", err)
	}
}

// A waiter whose watch cannot reach a silent master (blackholed) still
// follows the release through the others: its Lock gets the lock once the
// holder lets go. Its context is shorter than the 5 s the silent master's
// subscription takes to fail, which Lock waited for before.
func TestQuorumWaitWithSilentMaster(t *testing.T) {
	srvs := startMasters(t, 3)
	proxy := redisserver.NewProxy(t, srvs[0].Addr())
	clients := func() []redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return []redis.UniversalClient{rdb, srvs[1].Client(t), srvs[2].Client(t)}
	}
	newClient := func() *dlock.Client {
		q, err := NewQuorum(clients(), WithRestartDelay(0), WithVoteTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return quorumClient(t, q, dlock.WithDefaultTTL(30*time.Second))
	}
	a, b := newClient(), newClient()
	ctx := context.Background()
	held, err := a.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(true)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		l, err := b.Lock(wctx, "k")
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	// The waiter follows the release channel on the reachable masters.
	for _, s := range srvs[1:] {
		c := s.Client(t)
		for c.PubSubNumSub(ctx, "dlock:{k}:released").Val()["dlock:{k}:released"] == 0 {
			time.Sleep(10 * time.Millisecond) // polls for the subscription
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("waiter's Lock after the holder's Unlock, with a silent master: %v", err)
	}
}

// One server reached through two URLs (localhost and 127.0.0.1) would vote
// twice, and with one other master make a majority of three on its own:
// the quorum refuses it with ErrInvalidArgument instead of granting.
func TestQuorumRefusesOneServerTwice(t *testing.T) {
	srvs := startMasters(t, 2)
	waitUptime(t, srvs, 1)
	port := srvs[0].Addr()[strings.LastIndex(srvs[0].Addr(), ":"):]
	urls := []string{"redis://" + srvs[0].Addr(), "redis://" + srvs[1].Addr(), "redis://localhost" + port}
	c, err := OpenQuorum(urls, dlock.WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every try, not only the one that found it out.
	for i := range 3 {
		if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "one server") {
			t.Fatalf("TryLock %d on a quorum that names one server twice: %v, want ErrInvalidArgument", i, err)
		}
	}
}

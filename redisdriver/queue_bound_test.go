package redisdriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// The budget of one script call that settles names (SETTLE_BUDGET in
// queue_lib.lua), and what a call may visit besides: a grant or two, and
// the batch it stopped in.
const (
	settleBudget = 500
	settleSlack  = 260
)

// fillDead is a script of the tests' own that writes places of waiters
// that expired a second ago, in the record format of queue_lib.lua, to
// the head (ARGV[4] 'L') or tail ('R') of the name's queue: what a crashed
// fleet of waiters leaves, without one Enqueue round trip per place.
const fillDead = `
local w, dkey = KEYS[1] .. ':w', KEYS[1] .. ':d'
local t = redis.call('TIME')
local exp = tonumber(t[1]) * 1000 - 1000
local push = ARGV[4] == 'L' and 'LPUSH' or 'RPUSH'
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
  local id = string.format('dead%028x', i)
  redis.call(push, w, id)
  redis.call('HSET', dkey, id, 'W1:' .. exp .. ':0:0123456789abcdef0123456789abcdef' .. ARGV[3])
end
return 1`

// populateDead writes n expired places to the head (or, with !head, the
// tail) of key's queue, in pipelined chunks. The name must have a queue.
func populateDead(t testing.TB, rdb redis.Cmdable, d *Driver, key string, n int, head bool) {
	t.Helper()
	ctx := context.Background()
	rest := d.valueRest(time.Now(), driver.Owner{Host: "crashed-host", PID: 1})
	end := "R"
	if head {
		end = "L"
	}
	const chunk = 5000
	pipe := rdb.Pipeline()
	for from := 0; from < n; from += chunk {
		pipe.Eval(ctx, fillDead, []string{d.lockKey(key)}, from, min(from+chunk, n), rest, end)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rdb.LLen(ctx, d.lockKey(key)+":w").Val(); got < int64(n) {
		t.Fatalf("populated %d entries, want %d", got, n)
	}
}

// latencyProbe sends GET from a connection of its own, one after another,
// until finished, and keeps the slowest round trip: what an unrelated
// client of the server waits while a script runs.
type latencyProbe struct {
	stop  chan struct{}
	done  sync.WaitGroup
	worst atomic.Int64
	n     atomic.Int64
}

func startLatencyProbe(t testing.TB, addr string) *latencyProbe {
	t.Helper()
	c := redisserver.NewClient(t, addr)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p := &latencyProbe{stop: make(chan struct{})}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			start := time.Now()
			_ = c.Get(ctx, "unrelated").Err()
			if took := int64(time.Since(start)); took > p.worst.Load() {
				p.worst.Store(took)
			}
			p.n.Add(1)
		}
	}()
	return p
}

// finish stops the probe and returns the slowest GET and how many it sent.
func (p *latencyProbe) finish() (time.Duration, int64) {
	close(p.stop)
	p.done.Wait()
	return time.Duration(p.worst.Load()), p.n.Load()
}

// scriptRuns returns how long each script call (EVALSHA, FCALL, EVAL)
// ran, by the server's slow log (see logSlowCalls), in increasing order.
func scriptRuns(t testing.TB, rdb *redis.Client) []time.Duration {
	t.Helper()
	logs, err := rdb.SlowLogGet(context.Background(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var runs []time.Duration
	for _, l := range logs {
		if len(l.Args) > 0 && slices.Contains([]string{"evalsha", "fcall", "eval"}, strings.ToLower(l.Args[0])) {
			runs = append(runs, l.Duration)
		}
	}
	slices.Sort(runs)
	return runs
}

// logSlowCalls makes the server log every command in its slow log.
func logSlowCalls(t testing.TB, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "0"}, {"slowlog-max-len", "100000"}} {
		if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// The stall of a long queue of dead waiters. 200,000 places expired at the
// head of a queue, a live waiter behind them: the holder's release and
// then the waiter's own pokes settle the queue, no call visiting more than
// the budget (counted: entries gone per call), until the live waiter is
// granted, within ceil(200,000 / budget) + 2 of its pokes, each told to
// come again at once while work is left. An unrelated client's GET meanwhile
// waits for at most one call: the slowest GET and the slowest script run
// (SLOWLOG) are logged, with a bound far above them (docs/fair-lock.md has
// the figures, before and after). Both code modes.
func TestDeadWaitersSettleInBoundedSteps(t *testing.T) {
	for _, m := range codeModes {
		t.Run(m.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			rdb := srv.Client(t)
			d := newDriver(t, rdb, m.opts...)
			ctx := context.Background()
			req := func(id string) driver.QueueRequest {
				return driver.QueueRequest{Key: "k", ID: id, TTL: time.Minute, Mode: driver.ModeExclusive, Wait: true, Inbox: "box"}
			}
			if res, err := d.Enqueue(ctx, req("holder")); err != nil || !res.Granted {
				t.Fatal(res, err)
			}
			if res, err := d.Enqueue(ctx, req("live")); err != nil || !res.Queued {
				t.Fatal(res, err)
			}
			const dead = 200000
			populateDead(t, rdb, d, "k", dead, true)
			llen := func() int64 { return rdb.LLen(ctx, d.lockKey("k")+":w").Val() }
			logSlowCalls(t, rdb)
			probe := startLatencyProbe(t, srv.Addr())

			before := llen()
			if r := release(t, d, "k", "holder"); r != driver.Released {
				t.Fatalf("release: %v", r)
			}
			if gone := before - llen(); gone > settleBudget+settleSlack {
				t.Fatalf("the release settled %d entries in one call, more than the budget %d", gone, settleBudget)
			}
			pokes, bound := 0, dead/settleBudget+2
			for {
				before = llen()
				res, err := d.Enqueue(ctx, req("live"))
				if err != nil {
					t.Fatal(err)
				}
				pokes++
				if gone := before - llen(); gone > settleBudget+settleSlack {
					t.Fatalf("poke %d settled %d entries in one call, more than the budget %d", pokes, gone, settleBudget)
				}
				if res.Granted {
					break
				}
				if !res.Queued || res.RetryAfter != 0 {
					t.Fatalf("poke %d behind %d entries: %+v, want queued with RetryAfter 0", pokes, llen(), res)
				}
				if pokes > bound {
					t.Fatalf("not granted after %d pokes (bound %d), %d entries left", pokes, bound, llen())
				}
			}
			worstGet, gets := probe.finish()
			runs := scriptRuns(t, rdb)
			worstScript := runs[len(runs)-1]
			t.Logf("%s: granted after the release and %d pokes; slowest unrelated GET %v (of %d); script calls: median %v, slowest %v",
				m.name, pokes, worstGet, gets, runs[len(runs)/2], worstScript)
			if v := rdb.Get(ctx, d.lockKey("k")).Val(); !strings.HasPrefix(v, "live"+sep) {
				t.Fatalf("the lock is %q, want the live waiter's", v)
			}
			if n := rdb.HLen(ctx, d.lockKey("k")+":d").Val(); n > 8 {
				t.Errorf("%d records left in the queue hash, want the dead places' gone", n)
			}
			// A bound no loaded machine reaches with the budget, and that
			// the walk of the whole queue (over a second) exceeds.
			if worstScript > 250*time.Millisecond {
				t.Errorf("a script call ran %v", worstScript)
			}
		})
	}
}

// Dead places at the tail behind a live head, and expired release
// records: the head's renewals settle each at most the budget per call,
// and in a bounded number of calls all of it.
func TestDeadTailAndRecordsSettleInBoundedSteps(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	mustAcquire(t, d, "k", "holder")
	if res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: "head", TTL: time.Minute, Mode: driver.ModeExclusive,
		Wait: true, Inbox: "box"}); err != nil || !res.Queued {
		t.Fatal(res, err)
	}
	const dead = 20000
	populateDead(t, rdb, d, "k", dead, false)
	// Expired release records of as many departed waiters, in :e and :d.
	const fillRecords = `
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
  local id = string.format('r:gone%028x', i)
  redis.call('ZADD', KEYS[1] .. ':e', 1, id)
  redis.call('HSET', KEYS[1] .. ':d', id, '')
end
return 1`
	pipe := rdb.Pipeline()
	for from := 0; from < dead; from += 5000 {
		pipe.Eval(ctx, fillRecords, []string{d.lockKey("k")}, from, from+5000)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		return rdb.LLen(ctx, d.lockKey("k")+":w").Val() + rdb.ZCard(ctx, d.lockKey("k")+":e").Val()
	}
	renewals, bound := 0, 2*dead/settleBudget+2
	for size() > 3 { // the head, '#' and nothing else
		before := size()
		held, err := d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindWaiter, Key: "k", ID: "head", TTL: time.Minute}})
		if err != nil || !held[0] {
			t.Fatalf("the head's renewal: %v, %v", held, err)
		}
		renewals++
		if gone := before - size(); gone > settleBudget+settleSlack || gone <= 0 {
			t.Fatalf("renewal %d settled %d entries, want 1 to %d", renewals, gone, settleBudget)
		}
		if renewals > bound {
			t.Fatalf("%d renewals, %d entries left", renewals, size())
		}
	}
	if n := rdb.HLen(ctx, d.lockKey("k")+":d").Val(); n > 4 {
		t.Errorf("%d fields left in the queue hash", n)
	}
}

// A waiter leaving out of turn deep in a long queue (its release, or its
// poke after its place expired) costs no scan of the whole list: no LREM
// runs, its entry stays as an expired place, and a waiter that comes back
// has its old entry again, never a second one.
func TestDeepWaiterLeavesInBoundedTime(t *testing.T) {
	srv := redisserver.Start(t)
	rdb := srv.Client(t)
	d := newDriver(t, rdb)
	ctx := context.Background()
	mustAcquire(t, d, "k", "holder")
	enqueue := func(id string, ttl time.Duration) driver.QueueResult {
		t.Helper()
		res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: id, TTL: ttl, Mode: driver.ModeExclusive, Wait: true, Inbox: "box"})
		if err != nil || !res.Queued {
			t.Fatalf("enqueue %s: %+v, %v; want queued", id, res, err)
		}
		return res
	}
	enqueue("first", time.Minute)
	populateDead(t, rdb, d, "k", 5000, false) // between first and the deep waiters
	enqueue("cancels", time.Minute)
	enqueue("expires", 300*time.Millisecond)
	populateDead(t, rdb, d, "k", 5000, false) // and behind them
	enqueue("last", time.Minute)
	waitPlacesExpired(t, rdb, d, "k", "expires")

	before := commandStats(t, rdb)
	if r, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindWaiter, Key: "k", ID: "cancels"}}); err != nil || r[0] != driver.Released {
		t.Fatalf("release of a deep place: %v, %v", r, err)
	}
	if held, err := d.Renew(ctx, []driver.RenewRequest{{Kind: driver.KindWaiter, Key: "k", ID: "expires", TTL: time.Minute}}); err != nil || held[0] {
		t.Fatalf("renewal of an expired deep place: %v, %v; want false", held, err)
	}
	if calls := callsSince(t, rdb, before); calls["lrem"] != 0 {
		t.Errorf("%d LREM over the whole queue, want none", calls["lrem"])
	}
	if r, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindWaiter, Key: "k", ID: "cancels"}}); err != nil || r[0] != driver.AlreadyReleased {
		t.Errorf("repeated release of the deep place: %v, %v; want AlreadyReleased", r, err)
	}
	if ids := waiterIDs(t, d, "k"); fmt.Sprint(ids) != "[first last]" {
		t.Errorf("waiters %v, want [first last]: the places given up are out of the queue", ids)
	}
	// A request of its id that does not wait is refused, not queued (a
	// permit's goes past the exclusive holder's short cut, to the place).
	if res, err := d.Enqueue(ctx, driver.QueueRequest{Key: "k", ID: "expires", TTL: time.Minute, Mode: driver.ModePermit, Limit: 1}); err != nil || res.Granted || res.Queued {
		t.Errorf("non-waiting request of the expired deep waiter's id: %+v, %v; want refused", res, err)
	}
	// Back, the expired waiter has its entry again: one, where it was.
	enqueue("expires", time.Minute)
	pos, err := rdb.LPosCount(ctx, d.lockKey("k")+":w", "expires", 0, redis.LPosArgs{}).Result()
	if err != nil || len(pos) != 1 || pos[0] != 5002 {
		t.Errorf("entries of the waiter back: %v, %v; want one, at 5002", pos, err)
	}
}

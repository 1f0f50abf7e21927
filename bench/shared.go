package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock"
	"github.com/redis/go-redis/v9"
)

// The read-write lock and semaphore workloads: dlock against a raw Lua
// baseline of the common design (one hash of readers under one TTL,
// readers admitted whenever no writer holds; a ZSET of permit expiries),
// which polls. Each worker has its own client, as a separate process would.

const (
	rwReaders   = 15
	rwHold      = time.Millisecond // inside the read or write lock
	rwThink     = time.Millisecond // between a reader's leases
	writerThink = 5 * time.Millisecond
	semN        = 4
	semWorkers  = 16
	semHold     = 2 * time.Millisecond
)

// sharedWorkloads are the workload names this file runs.
var sharedWorkloads = []string{"rwlock", "semaphore"}

// sharedSide takes one kind of lease; the returned func releases it.
type sharedSide interface {
	acquire(ctx context.Context) (func(context.Context) error, error)
	close()
}

// sharedPeer makes the clients of one implementation.
type sharedPeer struct {
	name   string
	reader func(addr string) (sharedSide, error)
	writer func(addr string) (sharedSide, error)
	permit func(addr string, n int) (sharedSide, error)
}

func sharedPeers(retry time.Duration) []sharedPeer {
	return []sharedPeer{
		{name: "dlock", reader: dlockRW(true), writer: dlockRW(false), permit: dlockPermit},
		{name: "raw Lua (polling)",
			reader: func(addr string) (sharedSide, error) {
				return &rawRW{rdb: newRedisClient(addr), read: true, retry: retry}, nil
			},
			writer: func(addr string) (sharedSide, error) { return &rawRW{rdb: newRedisClient(addr), retry: retry}, nil },
			permit: func(addr string, n int) (sharedSide, error) {
				return &rawSem{rdb: newRedisClient(addr), n: n, retry: retry}, nil
			}},
	}
}

const sharedName = "bench:shared"

type dlockSide struct {
	rdb *redis.Client
	c   *dlock.Client
	get func(ctx context.Context) (*dlock.Lease, error)
}

func (d *dlockSide) acquire(ctx context.Context) (func(context.Context) error, error) {
	l, err := d.get(ctx)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (d *dlockSide) close() { _ = d.c.Close(); _ = d.rdb.Close() }

func dlockRW(read bool) func(addr string) (sharedSide, error) {
	return func(addr string) (sharedSide, error) {
		rdb, c, err := newDlockClient(addr)
		if err != nil {
			return nil, err
		}
		m := c.RWMutex(sharedName)
		get := m.Lock
		if read {
			get = m.RLock
		}
		return &dlockSide{rdb: rdb, c: c, get: func(ctx context.Context) (*dlock.Lease, error) { return get(ctx) }}, nil
	}
}

func dlockPermit(addr string, n int) (sharedSide, error) {
	rdb, c, err := newDlockClient(addr)
	if err != nil {
		return nil, err
	}
	s := c.Semaphore(sharedName, n)
	return &dlockSide{rdb: rdb, c: c, get: func(ctx context.Context) (*dlock.Lease, error) { return s.Acquire(ctx) }}, nil
}

// rawRWScript: KEYS[1] the hash; ARGV[1] 'r' or 'w', ARGV[2] id, ARGV[3]
// TTL ms. Readers share the hash's one TTL; a reader enters whenever no
// writer holds.
var rawRWScript = redis.NewScript(`
if ARGV[1] == 'r' then
  if redis.call('HEXISTS', KEYS[1], 'w') == 1 then return 0 end
else
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 1)
if ARGV[1] == 'w' then redis.call('HSET', KEYS[1], 'w', ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

var rawRWRelease = redis.NewScript(`
redis.call('HDEL', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
if ARGV[1] == 'w' then redis.call('HDEL', KEYS[1], 'w') end
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return 1`)

type rawRW struct {
	rdb   *redis.Client
	read  bool
	retry time.Duration
}

func (r *rawRW) acquire(ctx context.Context) (func(context.Context) error, error) {
	mode, id := "w", randomToken()
	if r.read {
		mode = "r"
	}
	key := "raw:" + sharedName
	if err := poll(ctx, r.retry, func() (bool, error) {
		n, err := rawRWScript.Run(ctx, r.rdb, []string{key}, mode, id, 30000).Int()
		return n == 1, err
	}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return rawRWRelease.Run(ctx, r.rdb, []string{key}, mode, id).Err() }, nil
}

func (r *rawRW) close() { _ = r.rdb.Close() }

// rawSemScript: KEYS[1] a ZSET of permit id -> expiry (server ms);
// ARGV[1] id, ARGV[2] N, ARGV[3] TTL ms.
var rawSemScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

type rawSem struct {
	rdb   *redis.Client
	n     int
	retry time.Duration
}

func (r *rawSem) acquire(ctx context.Context) (func(context.Context) error, error) {
	id, key := randomToken(), "raw:sem:"+sharedName
	if err := poll(ctx, r.retry, func() (bool, error) {
		n, err := rawSemScript.Run(ctx, r.rdb, []string{key}, id, r.n, 30000).Int()
		return n == 1, err
	}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return r.rdb.ZRem(ctx, key, id).Err() }, nil
}

func (r *rawSem) close() { _ = r.rdb.Close() }

// poll calls try until it succeeds, sleeping retry between attempts.
func poll(ctx context.Context, retry time.Duration, try func() (bool, error)) error {
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sharedStats is what the goroutines of one role collect.
type sharedStats struct {
	mu     sync.Mutex
	waits  []time.Duration
	cycles []int64 // per worker
	held   time.Duration
	errs   int64
	// unfinished is the longest wait cut short by the end of the run: a
	// starved writer's wait, which no completed sample shows.
	unfinished time.Duration
}

func (s *sharedStats) add(worker int, wait, held time.Duration) {
	s.mu.Lock()
	s.waits = append(s.waits, wait)
	s.cycles[worker]++
	s.held += held
	s.mu.Unlock()
}

// occupancy checks the workload's exclusion from the benchmark's side.
type occupancy struct {
	readers, writers, permits atomic.Int32
	violations                atomic.Int64
	maxPermits                atomic.Int32
}

// runSide runs n workers of one role until ctx ends.
func runSide(ctx context.Context, sides []sharedSide, hold, think time.Duration, st *sharedStats, enter, leave func()) {
	var wg sync.WaitGroup
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				release, err := s.acquire(ctx)
				if err != nil {
					st.mu.Lock()
					if ctx.Err() == nil {
						st.errs++
					} else {
						st.unfinished = max(st.unfinished, time.Since(start))
					}
					st.mu.Unlock()
					return
				}
				wait := time.Since(start)
				enter()
				time.Sleep(hold)
				leave()
				st.add(i, wait, hold)
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = release(rctx)
				cancel()
				time.Sleep(think)
			}
		}()
	}
	wg.Wait()
}

func makeSides(n int, mk func() (sharedSide, error)) ([]sharedSide, error) {
	var out []sharedSide
	for range n {
		s, err := mk()
		if err != nil {
			for _, o := range out {
				o.close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// runRWWorkload: 15 readers and 1 writer on one read-write lock.
func (b *bench) runRWWorkload(peers []sharedPeer) *table {
	t := &table{title: fmt.Sprintf("rwlock: %d readers (hold %v, think %v) and 1 writer (hold %v, think %v), one name, %v per peer",
		rwReaders, rwHold, rwThink, rwHold, writerThink, b.duration),
		head: []string{"peer", "reads/s", "writes", "writer wait p50", "writer wait p99", "longest writer wait", "reader wait p99", "exclusion violations"}}
	for _, p := range peers {
		b.reset()
		readers, err := makeSides(rwReaders, func() (sharedSide, error) { return p.reader(b.redisAddr) })
		if err != nil {
			t.add(p.name, "setup: "+err.Error(), "", "", "", "", "", "")
			continue
		}
		writers, err := makeSides(1, func() (sharedSide, error) { return p.writer(b.redisAddr) })
		if err != nil {
			t.add(p.name, "setup: "+err.Error(), "", "", "", "", "", "")
			continue
		}
		var occ occupancy
		rs := &sharedStats{cycles: make([]int64, rwReaders)}
		ws := &sharedStats{cycles: make([]int64, 1)}
		ctx, cancel := context.WithTimeout(context.Background(), b.duration)
		start := time.Now()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			runSide(ctx, readers, rwHold, rwThink, rs, func() {
				occ.readers.Add(1)
				if occ.writers.Load() != 0 {
					occ.violations.Add(1)
				}
			}, func() { occ.readers.Add(-1) })
		}()
		go func() {
			defer wg.Done()
			runSide(ctx, writers, rwHold, writerThink, ws, func() {
				if occ.writers.Add(1) != 1 || occ.readers.Load() != 0 {
					occ.violations.Add(1)
				}
			}, func() { occ.writers.Add(-1) })
		}()
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		for _, s := range append(readers, writers...) {
			s.close()
		}
		slices.Sort(ws.waits)
		slices.Sort(rs.waits)
		reads, writes := int64(len(rs.waits)), int64(len(ws.waits))
		longest := fmtDur(percentile(ws.waits, 1))
		if writes == 0 || ws.unfinished > percentile(ws.waits, 1) {
			longest = fmtDur(ws.unfinished) + " (unfinished at the end)"
		}
		t.add(p.name, fmtRate(float64(reads)/elapsed.Seconds()), fmt.Sprint(writes),
			fmtDur(percentile(ws.waits, 0.5)), fmtDur(percentile(ws.waits, 0.99)), longest, fmtDur(percentile(rs.waits, 0.99)),
			fmt.Sprint(occ.violations.Load()))
		if rs.errs+ws.errs > 0 {
			t.notes = append(t.notes, fmt.Sprintf("%s: %d failed acquisitions", p.name, rs.errs+ws.errs))
		}
	}
	t.notes = append(t.notes, "wait: from the lock call to its return; the longest writer wait includes one still unfinished when the run ended",
		"raw Lua: one hash per name under one TTL, a reader enters whenever no writer holds (the common design), polling every -retry")
	return t
}

// runSemWorkload: 16 workers on a semaphore of 4 permits.
func (b *bench) runSemWorkload(peers []sharedPeer) *table {
	t := &table{title: fmt.Sprintf("semaphore: N=%d, %d workers, hold %v, think 0, %v per peer", semN, semWorkers, semHold, b.duration),
		head: []string{"peer", "acquisitions/s", "permit utilization", "per-worker min / max", "Jain fairness", "wait p50", "wait p99", "most holders at once"}}
	for _, p := range peers {
		b.reset()
		sides, err := makeSides(semWorkers, func() (sharedSide, error) { return p.permit(b.redisAddr, semN) })
		if err != nil {
			t.add(p.name, "setup: "+err.Error(), "", "", "", "", "", "")
			continue
		}
		var occ occupancy
		st := &sharedStats{cycles: make([]int64, semWorkers)}
		ctx, cancel := context.WithTimeout(context.Background(), b.duration)
		start := time.Now()
		runSide(ctx, sides, semHold, 0, st, func() {
			n := occ.permits.Add(1)
			for m := occ.maxPermits.Load(); n > m && !occ.maxPermits.CompareAndSwap(m, n); m = occ.maxPermits.Load() {
			}
		}, func() { occ.permits.Add(-1) })
		elapsed := time.Since(start)
		cancel()
		for _, s := range sides {
			s.close()
		}
		slices.Sort(st.waits)
		lo, hi := slices.Min(st.cycles), slices.Max(st.cycles)
		t.add(p.name, fmtRate(float64(len(st.waits))/elapsed.Seconds()),
			fmt.Sprintf("%.0f %%", 100*st.held.Seconds()/(semN*elapsed.Seconds())),
			fmt.Sprintf("%d / %d", lo, hi), fmt.Sprintf("%.3f", jain(st.cycles)),
			fmtDur(percentile(st.waits, 0.5)), fmtDur(percentile(st.waits, 0.99)), fmt.Sprint(occ.maxPermits.Load()))
		if st.errs > 0 {
			t.notes = append(t.notes, fmt.Sprintf("%s: %d failed acquisitions", p.name, st.errs))
		}
	}
	t.notes = append(t.notes, "permit utilization: time inside the critical sections / (N × elapsed); Jain fairness: (Σx)²/(n·Σx²) over per-worker acquisitions, 1 is perfectly even",
		"raw Lua: a ZSET of permit id → expiry (server clock), expired ones pruned on each attempt, polling every -retry")
	return t
}

// jain is Jain's fairness index of xs.
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return math.NaN()
	}
	return sum * sum / (float64(len(xs)) * sq)
}

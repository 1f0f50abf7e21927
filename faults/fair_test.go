package faults

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// The fair lock (Lock with WithFIFO, docs/fair-lock.md) under faults.
// Workers take one fair lock, and besides what every dlock run is checked
// for, the checker asserts what the fair lock adds: validity windows never
// overlap, tokens strictly increase in grant order, and FIFO among live
// waiters (see fifoViolations). To see the queue, a worker's driver
// records every Enqueue: the request id, when it was sent, when its reply
// came and whether that reply queued it.

// roleFair makes a dlock worker take Lock(WithFIFO) (workerConfig.Role).
const roleFair = "fair"

// Event kinds of fair workers, emitted when Lock returns, before acq.
const (
	evEnq   = "enq"   // one Enqueue: request id N, sent at T0, answered at T, OK if it queued, Tok if it granted
	evGrant = "grant" // the Lock that returned at T holds request id N with token Tok
)

// recordingDriver is the Redis driver with its Enqueue calls recorded.
// Embedding keeps every optional interface of the driver.
type recordingDriver struct {
	*redisdriver.Driver
	mu   sync.Mutex
	recs []event
}

// Enqueue records the call around the driver's.
func (d *recordingDriver) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	t0 := now()
	res, err := d.Driver.Enqueue(ctx, req)
	e := event{K: evEnq, N: req.ID, T0: t0, T: now(), OK: err == nil && res.Queued}
	if err == nil && res.Granted {
		e.Tok = res.Token
	}
	d.mu.Lock()
	d.recs = append(d.recs, e)
	d.mu.Unlock()
	return res, err
}

// drain returns and forgets the records so far.
func (d *recordingDriver) drain() []event {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.recs
	d.recs = nil
	return out
}

// fairLock takes Lock(WithFIFO) on its own Client, whose driver records.
type fairLock struct {
	c   *dlock.Client
	drv *recordingDriver
	w   *worker
}

// newFairLock is the fair worker's lock; it exits the process if the
// Client cannot be made, as workerMain does.
func newFairLock(rdb *redis.Client, w *worker) *fairLock {
	base, err := redisdriver.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	drv := &recordingDriver{Driver: base}
	c, err := dlock.New(drv, dlock.WithDefaultTTL(w.cfg.TTL), dlock.WithRenewRetryDelay(w.cfg.TTL/10),
		dlock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return &fairLock{c: c, drv: drv, w: w}
}

func (f *fairLock) lock(ctx context.Context) (held, error) {
	l, err := f.c.Lock(ctx, lockName, dlock.WithFIFO())
	at := now()
	// Emitted here, on the worker's goroutine: the engine calls Enqueue
	// from its own goroutines, and only the worker writes to stdout. Before
	// acq, so that a holder killed the moment it reports acq has its
	// requests on record too; the validity window, which starts at acq,
	// loses the few microseconds these lines take.
	for _, e := range f.drv.drain() {
		f.w.emit(e)
	}
	if err != nil {
		return nil, err
	}
	f.w.emit(event{K: evGrant, N: l.ID(), Tok: l.Token(), T: at})
	h := &sharedHeld{dlockHeld{l: l, watched: make(chan struct{})}}
	go func() {
		<-l.Done()
		h.doneAt.Store(now())
		close(h.watched)
	}()
	return h, nil
}

// fairScenario is a fault run against the fair lock.
type fairScenario struct {
	scenario
	// wantRejected: the fault leaves a stale holder writing after a newer
	// one was at the register; the register must refuse it.
	wantRejected bool
}

// fairScenarios are the fair lock's fault runs.
func fairScenarios() []fairScenario {
	const ttl = 500 * time.Millisecond
	return []fairScenario{{scenario: scenario{
		name:  "fair-pause",
		fault: "SIGSTOP a holder after its read, SIGCONT once a rival has written (longer than the TTL)",
		ttl:   ttl, hold: 150 * time.Millisecond, faults: [2]int{1, 4}, setup: plainStore, inject: injectFairPause,
	}, wantRejected: true}, {scenario: scenario{
		name:  "fair-kill",
		fault: "SIGKILL a holder right after it acquired; a new worker replaces it",
		ttl:   ttl, hold: 100 * time.Millisecond, faults: [2]int{2, 8}, setup: plainStore, inject: injectKill,
	}}, {scenario: scenario{
		name:  "fair-restart",
		fault: "SIGKILL Redis (append-only, fsync always) while a holder works; restart it from its files",
		ttl:   ttl, hold: 150 * time.Millisecond, faults: [2]int{1, 3}, setup: persistentStore, inject: injectStoreRestart,
	}}, {scenario: scenario{
		// The work outlasts the TTL by 200 ms: a holder cut off after its
		// read loses its lease during the work, the next waiter takes over
		// and reads, and the cut-off holder's write comes after that read.
		name:  "fair-blackhole",
		fault: "black-hole a holder's traffic to Redis after its read (work 600 ms, TTL 400 ms); heal once a rival has read",
		ttl:   400 * time.Millisecond, hold: 600 * time.Millisecond, faults: [2]int{1, 4}, setup: plainStore, inject: injectFairBlackhole,
	}, wantRejected: true}, {scenario: scenario{
		name:  "fair-kill-waiter",
		fault: "SIGKILL the waiter at the head of the queue while a holder works and another waits; a new worker replaces it",
		ttl:   ttl, hold: 150 * time.Millisecond, faults: [2]int{2, 8}, setup: plainStore, inject: injectKillHeadWaiter,
	}}}
}

// injectFairPause is injectPause, and injectFairBlackhole injectBlackhole,
// except that a fault which left no refused write is tried again, up to
// three times per fault: a SIGSTOP that lands before the holder's lease
// check makes no stale holder (it wakes, sees its lease over and does not
// write), nor does a partition on a machine so slow that the holder
// writes before the next one took over.
func injectFairPause(r *run)     { untilRefused(r, pauseOnce) }
func injectFairBlackhole(r *run) { untilRefused(r, blackholeOnce) }

func untilRefused(r *run, once func(r *run, from int) (acq string, next int, ok bool)) {
	from := 0
	for range r.faults() {
		for try := 0; try < 3; try++ {
			acq, next, ok := once(r, from)
			if !ok {
				return
			}
			from = next
			if r.refused(acq) {
				break
			}
		}
	}
}

// pauseOnce freezes a holder after its read until a rival has written,
// and waits for the frozen holder's end.
func pauseOnce(r *run, from int) (string, int, bool) {
	ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
	if !ok {
		return "", next, false
	}
	r.signal(ev.W, syscall.SIGSTOP, evPause)
	r.fault(ev.W, "SIGSTOP")
	_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return e.K == evWrite && e.W != ev.W })
	r.signal(ev.W, syscall.SIGCONT, evResume)
	if !ok {
		r.t.Logf("pause: no rival wrote while %s was stopped", ev.W)
	}
	_, next, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	return ev.A, next, true
}

// blackholeOnce cuts a holder off after its read until a rival has read,
// and waits for the cut-off holder's end.
func blackholeOnce(r *run, from int) (string, int, bool) {
	ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
	if !ok {
		return "", next, false
	}
	px := r.proxies[ev.W]
	px.Partition(true)
	r.fault(ev.W, "partitioned")
	_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return isRead(e) && e.W != ev.W })
	px.Partition(false)
	if !ok {
		r.t.Logf("blackhole: no rival read while %s was cut off", ev.W)
	}
	_, next, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	return ev.A, next, true
}

// storeWorker is the worker name of faults that hit the store, not one
// worker: every waiter then is not live (fifoViolations).
const storeWorker = "*store*"

// injectStoreRestart kills Redis while someone holds and restarts it from
// its append-only file, recording the outage as a fault of everyone.
func injectStoreRestart(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isAcq)
		if !ok {
			return
		}
		r.fault(storeWorker, "redis killed while "+ev.W+" holds")
		r.store.Kill()
		r.store.Restart()
		r.fault(storeWorker, "redis restarted from its AOF")
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

// injectKillHeadWaiter kills the first waiter of the queue, as the store
// shows it, while someone holds and another waits behind it: the lock must
// not stay behind the dead head (it drops out within one TTL) and the
// waiter behind keeps its place. A replacement does the victim's
// remaining iterations.
func injectKillHeadWaiter(r *run) {
	insp := newInspector(r.t, r.store.Addr())
	for range r.faults() {
		victim, ok := r.headWaiter(insp)
		if !ok {
			r.t.Logf("kill-waiter: never saw a holder and two waiters")
			return
		}
		p := r.procs[victim]
		r.signal(victim, syscall.SIGKILL, evKill)
		r.fault(victim, "SIGKILL the head waiter")
		<-p.done
		if left := r.iters[victim] - r.finished(victim); left > 0 {
			r.spawn(left)
		}
		from := len(r.hub.snapshot())
		r.hub.waitFor(from, r.patience(), isAcq) // taken over: next kill
	}
}

// headWaiter polls the queue until it has a holder and at least two
// waiters and returns the worker whose process is the first waiter.
func (r *run) headWaiter(insp *dlock.Client) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), r.patience())
	defer cancel()
	for ctx.Err() == nil {
		q, ok, err := insp.InspectQueue(ctx, lockName)
		if err == nil && ok && len(q.Holders) > 0 && len(q.Waiters) >= 2 {
			for name, p := range r.procs {
				if p.cmd.Process.Pid == q.Waiters[0].Owner.PID && r.finished(name) < r.iters[name] {
					return name, true
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", false
}

// TestFaultsFair runs the pause, kill, restart, blackhole and dead-waiter
// scenarios against the fair lock.
func TestFaultsFair(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection takes minutes; skipped in -short mode")
	}
	if os.Getenv(redisserver.EnvAddr) != "" {
		t.Skip("fault injection needs redis-servers it owns; " + redisserver.EnvAddr + " is set")
	}
	m := suiteMode()
	m.workers = max(m.workers, 4) // at least two waiters behind a holder
	var rows []string
	for _, sc := range fairScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			r := newRun(t, sc.scenario, kindDlock, m)
			r.roles = []string{roleFair}
			res := r.execute()
			fr := checkFair(r.hub.snapshot())
			fr.leftKeys = r.keysLeft(sc.ttl)
			t.Logf("%s: %v; %v", sc.name, res, fr)
			checkFairRun(t, sc, res, fr)
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d | %d | %d (%d pairs) | %d/%d | %d | %s | %d |\n",
				sc.name, sc.fault, res.Stale, fr.overlaps, fr.tokenOrder, fr.fifo, fr.fifoPairs,
				res.Accepted, res.Rejected, res.Acquisitions, recoveryText(res), len(res.Leaked)+len(fr.leftKeys)))
		})
	}
	t.Logf("mode full=%v, %d workers x %d iterations:\n%s%s", m.full, m.workers, m.iters, fairTableHeader, strings.Join(rows, ""))
}

const fairTableHeader = "| Scenario | Fault injected | Stale writes accepted | Overlapping valid holders | " +
	"Tokens out of grant order | FIFO violations (live pairs checked) | Writes accepted / rejected | " +
	"Acquisitions | Kill to next acquisition | Leaked keys |\n" +
	"|---|---|---|---|---|---|---|---|---|---|\n"

// keysLeft waits until the lock store is empty, for at most 1.25 times the
// longest lease's TTL (the queue keys outlive their last lease by at most
// that, queue_lib.lua) plus a margin after the run, and returns the keys
// still there. Every worker has finished or been killed, so any key left,
// with or without an expiry, is a leak.
func (r *run) keysLeft(ttl time.Duration) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+ttl)
	defer cancel()
	rdb := redisserver.NewClient(r.t, r.store.Addr())
	deadline := time.Now().Add(ttl + ttl/4 + 100*time.Millisecond)
	for {
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			r.t.Errorf("listing keys: %v", err)
			return nil
		}
		if len(keys) == 0 || time.Now().After(deadline) {
			return keys
		}
		time.Sleep(10 * time.Millisecond)
	}
}

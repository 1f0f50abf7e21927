package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// Lock implementations a worker can use.
const (
	kindDlock = "dlock"
	kindNaive = "naive"
)

// lockName is the one lock every worker of a run competes for.
const lockName = "job"

// naiveKey is where the naive lock lives.
const naiveKey = "naive:" + lockName

// workerConfig is what the harness hands a worker process.
type workerConfig struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	LockAddr  string        `json:"lock_addr"`
	FenceAddr string        `json:"fence_addr"`
	Iters     int           `json:"iters"`
	TTL       time.Duration `json:"ttl"`
	Hold      time.Duration `json:"hold"`
	Think     time.Duration `json:"think"`   // pause between iterations
	GiveUp    time.Duration `json:"give_up"` // a last resort: the harness detects a stuck lock first
	// Role, for dlock only: "" takes Client.Lock; roleReader, roleWriter and
	// rolePermit take the read-write lock or a semaphore of Permits (see
	// shared_test.go).
	Role    string `json:"role,omitempty"`
	Permits int    `json:"permits,omitempty"`
}

// Event kinds. Workers report acq, read, write, end, err and stuck; the
// harness records kill, exit, pause, resume and fault.
const (
	evAcq    = "acq"    // the worker believes it holds the lock from T
	evRead   = "read"   // fenced read: called at T0, answered at T
	evWrite  = "write"  // fenced write: called at T0, answered at T
	evEnd    = "end"    // the worker stopped believing at T
	evErr    = "err"    // a failed call, retried
	evStuck  = "stuck"  // the lock made no progress (harness), or a worker gave up
	evKill   = "kill"   // SIGKILL delivered at T
	evExit   = "exit"   // the process was reaped at T
	evPause  = "pause"  // SIGSTOP delivered at T
	evResume = "resume" // SIGCONT delivered at T
	evFault  = "fault"  // the harness injected a fault (N says which)
)

// event is one line of history. Times are wall-clock UnixNano: workers are
// separate processes, and on one machine the wall clock is the one clock they
// all share (it is not stepped during a run).
type event struct {
	K   string `json:"k"`
	W   string `json:"w"`
	A   string `json:"a,omitempty"` // acquisition id
	T   int64  `json:"t"`
	T0  int64  `json:"t0,omitempty"`
	Tok uint64 `json:"tok,omitempty"` // fencing token sent to the register
	Ord uint64 `json:"ord,omitempty"` // acquisition order as the lock store saw it
	OK  bool   `json:"ok,omitempty"`
	V   int64  `json:"v,omitempty"`
	N   string `json:"n,omitempty"`
}

func now() int64 { return time.Now().UnixNano() }

// held is one acquisition, of either lock.
type held interface {
	token() uint64
	order() uint64
	settle(ctx context.Context) // runs after the acquisition is reported
	valid() bool
	// unlock releases and returns a note and, if the lease had already ended
	// before the call, when it did (else 0).
	unlock(ctx context.Context) (string, int64)
}

type locker interface {
	lock(ctx context.Context) (held, error)
}

type worker struct {
	cfg   workerConfig
	out   *json.Encoder
	lock  locker
	fence fenceClient
}

func workerMain(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	lockRdb := redis.NewClient(&redis.Options{Addr: cfg.LockAddr, ContextTimeoutEnabled: true})
	defer lockRdb.Close()
	fenceRdb := redis.NewClient(&redis.Options{Addr: cfg.FenceAddr, ContextTimeoutEnabled: true})
	defer fenceRdb.Close()
	w := &worker{cfg: cfg, out: json.NewEncoder(os.Stdout), fence: fenceClient{fenceRdb}}
	switch cfg.Kind {
	case kindNaive:
		w.lock = &naiveLock{rdb: lockRdb, ttl: cfg.TTL, name: cfg.Name}
	case kindDlock:
		drv, err := redisdriver.New(lockRdb)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		c, err := dlock.New(drv, dlock.WithDefaultTTL(cfg.TTL), dlock.WithRenewRetryDelay(cfg.TTL/10),
			dlock.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer c.Close()
		w.lock = dlockLock{c}
		if cfg.Role != "" {
			w.lock = sharedLock{c: c, role: cfg.Role, permits: cfg.Permits}
		}
		if cfg.Role == roleFair {
			w.lock = newFairLock(lockRdb, w) // fair_test.go
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown lock kind", cfg.Kind)
		return 2
	}
	for i := range cfg.Iters {
		if !w.iteration(fmt.Sprintf("%s.%d", cfg.Name, i)) {
			break
		}
		// Other work between critical sections. Without it the releasing
		// worker wins the lock straight back, before the release notification
		// reaches the waiters, and they starve (no lock promises fairness).
		time.Sleep(cfg.Think)
	}
	return 0
}

func (w *worker) emit(e event) {
	e.W = w.cfg.Name
	if e.T == 0 {
		e.T = now()
	}
	if err := w.out.Encode(e); err != nil {
		os.Exit(3) // the harness is gone: nobody records what we do
	}
}

// iteration is one lock, read-modify-write, unlock cycle. It reports false
// when the worker should stop.
func (w *worker) iteration(id string) bool {
	giveUp := time.Now().Add(w.cfg.GiveUp)
	var h held
	for {
		ctx, cancel := context.WithDeadline(context.Background(), giveUp)
		var err error
		h, err = w.lock.lock(ctx)
		cancel()
		if err == nil {
			break
		}
		if !time.Now().Before(giveUp) {
			w.emit(event{K: evStuck, A: id, N: err.Error()})
			return false
		}
		w.emit(event{K: evErr, A: id, N: "lock: " + err.Error()})
		time.Sleep(w.cfg.TTL / 20) // back off from a failing store
	}
	w.emit(event{K: evAcq, A: id, Tok: h.token(), Ord: h.order(), N: w.cfg.Role})
	// Generous timeouts: a pause or partition must reach the register, not
	// be cut short by the worker.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.settle(ctx)
	w.criticalSection(ctx, id, h)
	end := now()
	uctx, ucancel := context.WithTimeout(context.Background(), 2*w.cfg.TTL+time.Second)
	defer ucancel()
	note, doneAt := h.unlock(uctx)
	if doneAt > 0 && doneAt < end {
		end = doneAt // the lease told us earlier that it was over
	}
	w.emit(event{K: evEnd, A: id, T: end, N: note})
	return true
}

// criticalSection reads the counter, checks the lease once, works for Hold
// and writes the counter plus one. Like the client in the well-known GC-pause
// illustration, it does not check the lease again between the work and the
// write: any pause or delay during the work reaches the register, where only
// the fencing token can stop it.
func (w *worker) criticalSection(ctx context.Context, id string, h held) {
	if w.cfg.Role == roleReader || w.cfg.Role == rolePermit {
		w.sharedSection(ctx, id, h)
		return
	}
	t0 := now()
	ok, v, err := w.fence.read(ctx, id, h.token())
	e := event{K: evRead, A: id, T0: t0, OK: ok, V: v}
	if err != nil {
		e.N = err.Error()
	}
	w.emit(e)
	if err != nil || !ok || !h.valid() {
		return
	}
	time.Sleep(w.cfg.Hold)
	t0 = now()
	ok, err = w.fence.write(ctx, id, h.token(), v+1)
	e = event{K: evWrite, A: id, T0: t0, OK: ok, V: v + 1}
	if err != nil {
		e.N = err.Error()
	}
	w.emit(e)
}

// dlockLock takes dlock leases.
type dlockLock struct{ c *dlock.Client }

func (d dlockLock) lock(ctx context.Context) (held, error) {
	l, err := d.c.Lock(ctx, lockName)
	if err != nil {
		return nil, err
	}
	h := &dlockHeld{l: l, watched: make(chan struct{})}
	go func() {
		<-l.Done()
		h.doneAt.Store(now())
		close(h.watched)
	}()
	return h, nil
}

type dlockHeld struct {
	l       *dlock.Lease
	doneAt  atomic.Int64 // when Done closed
	watched chan struct{}
}

func (h *dlockHeld) token() uint64          { return h.l.Token() }
func (h *dlockHeld) order() uint64          { return h.l.Token() }
func (h *dlockHeld) settle(context.Context) {}
func (h *dlockHeld) valid() bool            { return h.l.Err() == nil }
func (h *dlockHeld) unlock(ctx context.Context) (string, int64) {
	err := h.l.Unlock(ctx)
	<-h.watched // Unlock ends the lease, so Done is closed by now or soon
	note := "released"
	switch {
	case errors.Is(err, dlock.ErrNotHeld):
		note = "not held"
	case err != nil:
		note = "unlock: " + err.Error()
	}
	return note, h.doneAt.Load()
}

// naiveLock is the lock the canary runs: SETNX, then EXPIRE as a second
// command, DEL without an ownership check, no renewal and no fencing token.
// The Redis TIME read in the same transaction as SETNX is bookkeeping for the
// checker (the order in which the store granted the lock); it never reaches
// the register.
type naiveLock struct {
	rdb  *redis.Client
	ttl  time.Duration
	name string
}

func (n *naiveLock) lock(ctx context.Context) (held, error) {
	for {
		var set *redis.BoolCmd
		var tm *redis.TimeCmd
		_, err := n.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			set = p.SetNX(ctx, naiveKey, n.name, 0)
			tm = p.Time(ctx)
			return nil
		})
		if err == nil && set.Val() {
			return &naiveHeld{n: n, ord: uint64(tm.Val().UnixMicro())}, nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond): // poll: the naive lock has no notifications
		}
	}
}

type naiveHeld struct {
	n   *naiveLock
	ord uint64
}

func (h *naiveHeld) token() uint64 { return 0 }
func (h *naiveHeld) order() uint64 { return h.ord }
func (h *naiveHeld) valid() bool   { return true }

// naiveGap is the naive lock's window between SETNX and EXPIRE: whatever
// its code does in between (a log line, a metric, a GC pause). The kill
// scenario kills the holder the moment it reports its SETNX; without a gap
// the EXPIRE, already on its way, would usually win that race and the
// canary would show nothing.
const naiveGap = 50 * time.Millisecond

func (h *naiveHeld) settle(ctx context.Context) {
	time.Sleep(naiveGap)
	_ = h.n.rdb.PExpire(ctx, naiveKey, h.n.ttl).Err() // as naive code does: errors ignored
}

func (h *naiveHeld) unlock(ctx context.Context) (string, int64) {
	if err := h.n.rdb.Del(ctx, naiveKey).Err(); err != nil {
		return "del: " + err.Error(), 0
	}
	return "deleted", 0
}

package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/redisdriver"
)

// The read-write lock and the semaphore under faults. Workers take read or
// write leases of one read-write lock, or permits of one semaphore, and the
// checker asserts what docs/rwlock.md and docs/semaphore.md promise: no
// writer overlaps anyone and no more than N permits are valid at once
// (validity: from the grant to the end of the lease, or its validity
// deadline if that came first — a frozen process cannot renew, so its
// lease is over at its deadline whatever it believes when it wakes),
// fenced writers and readers rejected once a newer writer has been at the
// register, and no permit or key left behind.

// Worker roles (workerConfig.Role).
const (
	roleReader = "reader"
	roleWriter = "writer"
	rolePermit = "permit"
)

// sharedLock takes the read-write lock or a permit of the semaphore.
type sharedLock struct {
	c       *dlock.Client
	role    string
	permits int
}

func (s sharedLock) lock(ctx context.Context) (held, error) {
	var l *dlock.Lease
	var err error
	switch s.role {
	case roleReader:
		l, err = s.c.RWMutex(lockName).RLock(ctx)
	case roleWriter:
		l, err = s.c.RWMutex(lockName).Lock(ctx)
	case rolePermit:
		l, err = s.c.Semaphore(lockName, s.permits).Acquire(ctx)
	default:
		return nil, fmt.Errorf("unknown role %q", s.role)
	}
	if err != nil {
		return nil, err
	}
	h := &sharedHeld{dlockHeld{l: l, watched: make(chan struct{})}}
	go func() {
		<-l.Done()
		h.doneAt.Store(now())
		close(h.watched)
	}()
	return h, nil
}

// sharedHeld reports the end of validity: the lease's end or its last
// validity deadline, whichever came first.
type sharedHeld struct{ dlockHeld }

func (h *sharedHeld) unlock(ctx context.Context) (string, int64) {
	note, doneAt := h.dlockHeld.unlock(ctx)
	if d := h.l.Deadline().UnixNano(); doneAt == 0 || d < doneAt {
		doneAt = d
	}
	return note, doneAt
}

// sharedSection is the critical section of a reader — a fenced read, the
// work, and a second read, as a reader that reads several records under one
// lease does — and of a permit holder (work only: permits have no fencing
// token).
func (w *worker) sharedSection(ctx context.Context, id string, h held) {
	if w.cfg.Role != roleReader {
		if h.valid() {
			time.Sleep(w.cfg.Hold)
		}
		return
	}
	// The lease is checked once, before the first read (so a freeze right
	// after that read cannot make the reader skip the second one).
	if !h.valid() || !w.sharedRead(ctx, id, h) {
		return
	}
	time.Sleep(w.cfg.Hold)
	// Its own id for the register and the checker, whose model has one
	// read per acquisition.
	w.sharedRead(ctx, id+secondRead, h)
}

// secondRead marks a reader's second read.
const secondRead = "/2"

// sharedRead is one fenced read under a read lease.
func (w *worker) sharedRead(ctx context.Context, id string, h held) bool {
	t0 := now()
	v, err := fenceScript.Run(ctx, w.fence.rdb, w.fence.keys(), "q", h.token(), id).Int64Slice()
	e := event{K: evRead, A: id, T0: t0}
	if err != nil {
		e.N = err.Error()
	} else {
		e.OK, e.V = v[0] == 1, v[1]
	}
	w.emit(e)
	return e.OK
}

// sharedScenario is a fault run against a read-write lock or a semaphore.
type sharedScenario struct {
	scenario
	roles   []string // worker i takes roles[i % len(roles)]
	permits int
	// wantRejected: the faults leave stale holders that the register must
	// reject, writes and reads alike.
	wantRejected bool
}

func sharedScenarios() []sharedScenario {
	const ttl = 500 * time.Millisecond
	rw := []string{roleWriter, roleReader, roleReader}
	sem := []string{rolePermit}
	kill := scenario{
		name: "kill", fault: "SIGKILL a holder right after it acquired; a new worker replaces it",
		ttl: ttl, hold: 100 * time.Millisecond, faults: [2]int{2, 8}, setup: plainStore, inject: injectKill,
	}
	pause := scenario{
		name: "pause", fault: "SIGSTOP a holder right after it acquired, SIGCONT after 2 TTLs",
		ttl: ttl, hold: 150 * time.Millisecond, faults: [2]int{1, 4}, setup: plainStore, inject: injectPausePastTTL,
	}
	restart := scenario{
		name: "restart", fault: "SIGKILL Redis (append-only, fsync always) while holders work; restart it from its files",
		ttl: ttl, hold: 300 * time.Millisecond, faults: [2]int{1, 3}, setup: persistentStore, inject: injectRestartPersistent,
	}
	stale := sharedScenario{scenario: scenario{
		name: "rwlock-stale", fault: "SIGSTOP a writer after its read, or a reader between its two reads; SIGCONT once another writer has written",
		ttl: ttl, hold: 400 * time.Millisecond, faults: [2]int{2, 6}, setup: plainStore, inject: injectStale,
	}, roles: rw, wantRejected: true} // a long hold: the SIGSTOP lands inside it even on a loaded machine
	var out []sharedScenario
	for _, sc := range []scenario{kill, pause, restart} {
		r := sc
		r.name = "rwlock-" + sc.name
		s := sc
		s.name = "semaphore-" + sc.name
		out = append(out, sharedScenario{scenario: r, roles: rw}, sharedScenario{scenario: s, roles: sem, permits: 2})
	}
	return append(out, stale)
}

// persistentStore is one redis-server that writes every command to its
// append-only file before answering.
func persistentStore(r *run) {
	r.store = redisserver.Start(r.t, redisserver.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
}

// injectRestartPersistent kills Redis while someone holds and restarts it
// from its append-only file.
func injectRestartPersistent(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isAcq)
		if !ok {
			return
		}
		r.store.Kill()
		r.store.Restart()
		r.fault(ev.W, "redis restarted from its AOF")
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

// injectPausePastTTL freezes a holder the moment it acquired, until its
// TTL has run out twice over and someone else has acquired since.
func injectPausePastTTL(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isAcq)
		if !ok {
			return
		}
		r.signal(ev.W, syscall.SIGSTOP, evPause)
		r.fault(ev.W, "SIGSTOP")
		until := time.Now().Add(2 * r.sc.ttl).UnixNano()
		_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return isAcq(e) && e.W != ev.W && e.T > until })
		r.signal(ev.W, syscall.SIGCONT, evResume)
		if !ok {
			r.t.Logf("pause: nobody acquired while %s was stopped", ev.W)
		}
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

// injectStale makes stale holders of both kinds, in turn: a writer frozen
// after its read (its write must be rejected) and a reader frozen after its
// first read (its second read must be rejected); each is let go once
// another writer has written. A freeze that landed too late to make a
// stale holder (the writer had not yet checked its lease, so it skipped
// its write) is tried again, up to three times per fault.
func injectStale(r *run) {
	from := 0
	for i := range r.faults() {
		wantRole := roleWriter
		if i%2 == 1 {
			wantRole = roleReader
		}
		for try := 0; try < 3; try++ {
			ev, next, ok := r.hub.waitFor(from, r.patience(), func(e event) bool {
				return isRead(e) && r.workerRoles[e.W] == wantRole && !strings.HasSuffix(e.A, secondRead)
			})
			if !ok {
				return
			}
			r.signal(ev.W, syscall.SIGSTOP, evPause)
			r.fault(ev.W, "SIGSTOP "+wantRole)
			_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return e.K == evWrite && e.OK && e.W != ev.W })
			r.signal(ev.W, syscall.SIGCONT, evResume)
			if !ok {
				r.t.Logf("stale: no other writer wrote while %s was stopped", ev.W)
			}
			_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
			if r.refused(ev.A) {
				break
			}
		}
	}
}

// refused reports whether the register refused the stale call of
// acquisition acq: its write, or a reader's second read.
func (r *run) refused(acq string) bool {
	for _, e := range r.hub.snapshot() {
		if (e.K == evWrite && e.A == acq || e.K == evRead && e.A == acq+secondRead) && !e.OK && e.N == "" {
			return true
		}
	}
	return false
}

// rejectedReads counts the read-lease reads the register refused.
func (r *run) rejectedReads() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redisserver.NewClient(r.t, r.fence.Addr())
	lines, err := rdb.LRange(ctx, fenceName+":log", 0, -1).Result()
	if err != nil {
		r.t.Fatalf("reading the register log: %v", err)
	}
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "q ") && strings.HasSuffix(l, " 0") {
			n++
		}
	}
	return n
}

// TestFaultsShared runs the kill, pause and restart scenarios against the
// read-write lock (1 writer per 2 readers) and a semaphore of 2 permits.
func TestFaultsShared(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection takes minutes; skipped in -short mode")
	}
	if os.Getenv(redisserver.EnvAddr) != "" {
		t.Skip("fault injection needs redis-servers it owns; " + redisserver.EnvAddr + " is set")
	}
	m := suiteMode()
	m.workers = max(m.workers, 4)
	var rows []string
	for _, sc := range sharedScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			r := newRun(t, sc.scenario, kindDlock, m)
			r.roles, r.permits = sc.roles, sc.permits
			res := r.execute()
			sr := checkShared(r.hub.snapshot(), sc.permits)
			left := r.leftHolders()
			sr.rejectedReads = r.rejectedReads()
			t.Logf("%s: %v; %v; holders left %d", sc.name, res, sr, left)
			checkSharedRun(t, sc, res, sr, left)
			rows = append(rows, fmt.Sprintf("| %s | %s | %d | %d | %d | %d/%d | %d | %d | %d | %s |\n",
				sc.name, sc.fault, sr.conflicts, res.Stale, left+len(res.Leaked), res.Accepted, res.Rejected, sr.rejectedReads,
				res.Acquisitions, sr.maxPermits, recoveryText(res)))
		})
	}
	t.Logf("mode full=%v, %d workers x %d iterations:\n%s%s", m.full, m.workers, m.iters, sharedTableHeader, strings.Join(rows, ""))
}

const sharedTableHeader = "| Scenario | Fault injected | Conflicting holders | Stale writes accepted | Leaked permits and keys | " +
	"Writes accepted / rejected | Reads rejected | Acquisitions | Most permits valid at once | Kill to next acquisition |\n" +
	"|---|---|---|---|---|---|---|---|---|---|\n"

// leftHolders waits one TTL after the run and counts the holders and
// waiters still recorded for the name: a permit or share that nobody holds
// any more must be gone by then.
func (r *run) leftHolders() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+2*r.sc.ttl)
	defer cancel()
	c := newInspector(r.t, r.store.Addr())
	deadline := time.Now().Add(r.sc.ttl + 100*time.Millisecond)
	for {
		q, ok, err := c.InspectQueue(ctx, lockName)
		switch {
		case err != nil:
			r.t.Errorf("inspect: %v", err)
			return -1
		case !ok:
			return 0
		case time.Now().After(deadline):
			return len(q.Holders) + len(q.Waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newInspector is a dlock Client for looking at the store.
func newInspector(t *testing.T, addr string) *dlock.Client {
	drv, err := redisdriver.New(redisserver.NewClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

package sqlfence_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/redistest"
	"github.com/dlockio/dlock/sqlstore/internal/pgtest"
	"github.com/dlockio/dlock/sqlstore/sqlfence"
)

// faultRun is one fault scenario: worker processes incrementing a counter
// row in a real PostgreSQL, under a dlock lock on a real redis-server,
// while the harness pauses and kills them or restarts the database.
type faultRun struct {
	t     *testing.T
	pg    *pgtest.Server
	db    *sql.DB
	redis *redistest.Server
	base  workerConfig

	mu      sync.Mutex
	events  []workerEvent
	changed chan struct{} // closed and replaced on every new event
	procs   map[string]*workerProc
	spawned int
	wg      sync.WaitGroup // readers of workers' output
}

type workerProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func newFaultRun(t *testing.T, iters int, unfenced bool) *faultRun {
	pg := pgtest.Start(t)
	db := pg.Open(t)
	ctx := testCtx(t)
	if err := sqlfence.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE counter (id int PRIMARY KEY, v bigint NOT NULL)",
		"INSERT INTO counter VALUES (1, 0)",
		// The ground truth: every committed increment, in commit order (the
		// guard's row lock serializes the transactions that insert here).
		`CREATE TABLE writes (seq bigserial PRIMARY KEY, worker text NOT NULL, iter int NOT NULL,
			token bigint NOT NULL, before bigint NOT NULL, after bigint NOT NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r := &faultRun{t: t, pg: pg, db: db, redis: redistest.Start(t), changed: make(chan struct{}), procs: map[string]*workerProc{}}
	r.base = workerConfig{Redis: r.redis.Addr(), DSN: pg.DSN(), Iters: iters, TTL: 300 * time.Millisecond,
		Work: 60 * time.Millisecond, Unfenced: unfenced}
	t.Cleanup(r.stopAll)
	return r
}

// spawn starts a worker process doing iters iterations.
func (r *faultRun) spawn(iters int) string {
	r.mu.Lock()
	r.spawned++
	name := fmt.Sprintf("w%d", r.spawned)
	r.mu.Unlock()
	cfg := r.base
	cfg.Name, cfg.Iters = name, iters
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &workerProc{cmd: cmd, done: make(chan struct{})}
	r.mu.Lock()
	r.procs[name] = p
	r.mu.Unlock()
	r.wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e workerEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				r.t.Errorf("worker %s printed %q", name, sc.Text())
				continue
			}
			r.add(e)
		}
		_ = cmd.Wait()
		close(p.done)
	})
	return name
}

func (r *faultRun) add(e workerEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor returns the first event at index from or later that matches, and
// the index after it; ok is false after timeout.
func (r *faultRun) waitFor(from int, timeout time.Duration, match func(workerEvent) bool) (workerEvent, int, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for i := from; i < len(r.events); i++ {
			if match(r.events[i]) {
				e := r.events[i]
				r.mu.Unlock()
				return e, i + 1, true
			}
		}
		from = len(r.events)
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return workerEvent{}, from, false
		}
	}
}

func (r *faultRun) signal(name string, sig syscall.Signal) {
	r.mu.Lock()
	p := r.procs[name]
	r.mu.Unlock()
	if err := p.cmd.Process.Signal(sig); err != nil {
		r.t.Errorf("signal %v to %s: %v", sig, name, err)
	}
	if sig == syscall.SIGKILL {
		<-p.done
	}
}

// awaitWorkers waits for every worker to exit, killing them after timeout.
func (r *faultRun) awaitWorkers(timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	r.mu.Lock()
	procs := make([]*workerProc, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline.C:
			r.t.Error("workers did not finish in time")
			r.stopAll()
			return
		}
	}
	r.wg.Wait()
}

func (r *faultRun) stopAll() {
	r.mu.Lock()
	procs := r.procs
	r.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot die
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	r.wg.Wait()
}

// faultResult is what the database and the workers' reports show.
type faultResult struct {
	writes        int // committed increments (rows of the log)
	counter       int64
	staleAccepted int // committed with a token below an earlier commit's
	lostUpdates   int // committed over a value another commit had replaced
	acked         int // commits the workers reported
	ackedMissing  int // reported commits the log does not have
	refused       int // writes refused as stale
	refusedLost   int // of which by a holder that knew its lease had ended
}

func (r *faultRun) result(ctx context.Context) faultResult {
	r.t.Helper()
	var res faultResult
	// The database may just have been restarted: the pool's first
	// connections can be dead ones.
	var rows *sql.Rows
	var err error
	for try := 0; try < 5; try++ {
		if rows, err = r.db.QueryContext(ctx, "SELECT worker, iter, token, before, after FROM writes ORDER BY seq"); err == nil {
			break
		}
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	logged := map[[2]any]bool{}
	var top, prevAfter int64
	for rows.Next() {
		var w string
		var i int
		var tok, before, after int64
		if err := rows.Scan(&w, &i, &tok, &before, &after); err != nil {
			r.t.Fatal(err)
		}
		res.writes++
		logged[[2]any{w, i}] = true
		if tok < top {
			res.staleAccepted++
		}
		top = max(top, tok)
		if before != prevAfter {
			res.lostUpdates++
		}
		prevAfter = after
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.db.QueryRowContext(ctx, "SELECT v FROM counter WHERE id = 1").Scan(&res.counter); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		switch e.K {
		case "commit":
			res.acked++
			if !logged[[2]any{e.W, e.I}] {
				res.ackedMissing++
			}
		case "stale":
			res.refused++
			if e.Lost {
				res.refusedLost++
			}
		}
	}
	return res
}

// checkFenced asserts what the fence guarantees whatever the fault.
func (res faultResult) checkFenced(t *testing.T) {
	t.Helper()
	t.Logf("%+v", res)
	if res.staleAccepted != 0 || res.lostUpdates != 0 {
		t.Errorf("%d stale writes accepted, %d lost updates", res.staleAccepted, res.lostUpdates)
	}
	if res.counter != int64(res.writes) {
		t.Errorf("counter %d after %d logged increments", res.counter, res.writes)
	}
	if res.ackedMissing != 0 || res.acked > res.writes {
		t.Errorf("%d of %d acknowledged commits missing from %d logged", res.ackedMissing, res.acked, res.writes)
	}
}

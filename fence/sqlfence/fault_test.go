package sqlfence_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/workerproc"
)

// The fault tests run real worker processes (this test binary, re-executed)
// against a real PostgreSQL and a real redis-server. Each worker increments
// a counter row by fenced read-modify-writes under a dlock lock; the
// database's own log of committed increments is the ground truth.

const patience = 20 * time.Second

// TestFaultPausedWorker: a worker frozen (SIGSTOP) past its TTL between its
// read and its write gets ErrStaleToken when it wakes; nothing stale is
// committed. The same run without the guard shows the harness can see the
// stale write it prevents.
func TestFaultPausedWorker(t *testing.T) {
	const workers, iters, faults = 3, 8, 3
	t.Run("fenced", func(t *testing.T) {
		r := newFaultRun(t, iters, false)
		for range workers {
			r.spawn(iters)
		}
		effective, refused := r.PauseAfterRead(faults, patience)
		r.Await(2 * patience)
		res := r.result(testCtx(t))
		res.checkFenced(t)
		if effective == 0 || refused != effective {
			t.Errorf("%d paused workers wrote after a rival's commit, %d were refused; want all, and at least one", effective, refused)
		}
		if res.RefusedLost < refused {
			t.Errorf("%d refused writes by holders that knew their lease had ended, want at least the %d paused", res.RefusedLost, refused)
		}
	})
	t.Run("unfenced canary", func(t *testing.T) {
		r := newFaultRun(t, iters, true)
		for range workers {
			r.spawn(iters)
		}
		effective, _ := r.PauseAfterRead(faults, patience)
		r.Await(2 * patience)
		res := r.result(testCtx(t))
		t.Logf("%+v", res)
		if effective > 0 && res.staleAccepted+res.lostUpdates == 0 {
			t.Errorf("without the guard, %d paused writes after a rival's commit went unnoticed: the harness cannot see a stale write", effective)
		}
		if effective == 0 {
			t.Error("no pause took effect")
		}
	})
}

// TestFaultKilledWorker: a worker killed (SIGKILL) inside its write
// transaction, before COMMIT, leaves no trace; a replacement carries on; no
// acknowledged increment is lost, none is stale.
func TestFaultKilledWorker(t *testing.T) {
	const workers, iters, faults = 3, 6, 3
	r := newFaultRun(t, iters, false)
	r.base.Hold = 250 * time.Millisecond // the kill must land before COMMIT; the watchdog keeps the lease
	for range workers {
		r.spawn(iters)
	}
	killed := map[[2]any]bool{}
	from := 0
	for range faults {
		w, next, ok := r.WaitFor(from, patience, workerproc.Kind("write"))
		if !ok {
			t.Fatal("no worker wrote")
		}
		r.Signal(w.W, syscall.SIGKILL)
		killed[[2]any{w.W, w.I}] = true
		r.spawn(2)
		from = next
	}
	r.Await(2 * patience)
	ctx := testCtx(t)
	res := r.result(ctx)
	res.checkFenced(t)
	if res.Acked != res.writes {
		t.Errorf("%d commits acknowledged, %d logged; nothing else was in flight", res.Acked, res.writes)
	}
	for k := range killed {
		var n int
		if err := r.db.QueryRowContext(ctx, "SELECT count(*) FROM writes WHERE worker = $1 AND iter = $2", k[0], k[1]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("the write %s was killed in left %d rows", k[0], n)
		}
	}
}

// TestFaultDatabaseRestart: the database is restarted between two writes,
// once cleanly and once after SIGKILL; the high-water marks survive (they
// are committed data), so no stale write gets in afterwards.
func TestFaultDatabaseRestart(t *testing.T) {
	const workers, iters = 3, 10
	r := newFaultRun(t, iters, false)
	for range workers {
		r.spawn(iters)
	}
	from := 0
	for f, kill := range []bool{false, true} {
		_, next, ok := r.WaitFor(from, patience, workerproc.Kind("commit"))
		if !ok {
			t.Fatalf("fault %d: no commit", f)
		}
		if kill {
			r.pg.Kill(t)
		}
		r.pg.Restart(t)
		from = next
	}
	// The workers notice, retry and go on committing.
	if _, _, ok := r.WaitFor(from, patience, workerproc.Kind("commit")); !ok {
		t.Fatal("no commit after the restarts")
	}
	r.Await(3 * patience)
	res := r.result(testCtx(t))
	res.checkFenced(t)
	if res.writes == 0 {
		t.Error("nothing committed")
	}
	errs := 0
	for _, e := range r.Events() {
		if e.K == "err" {
			errs++
		}
	}
	if errs == 0 {
		t.Error("no worker saw the database go away: the restarts proved nothing")
	}
}

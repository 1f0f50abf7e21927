package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dlockio/dlock/fence/sqlfence"
	"github.com/dlockio/dlock/internal/testkit/pgserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
)

// faultRun is one fault scenario: worker processes incrementing a counter
// row in a real PostgreSQL, under a dlock lock on a real redis-server,
// while the harness pauses and kills them or restarts the database.
type faultRun struct {
	*workerproc.Harness
	t     *testing.T
	pg    *pgserver.Server
	db    *sql.DB
	redis *redisserver.Server
	base  workerConfig
}

func newFaultRun(t *testing.T, iters int, unfenced bool) *faultRun {
	if testing.Short() {
		t.Skip("fault injection with worker processes; skipped in -short mode")
	}
	pg := pgserver.Start(t)
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
	r := &faultRun{Harness: workerproc.New(t, workerEnv), t: t, pg: pg, db: db, redis: redisserver.Start(t)}
	r.base = workerConfig{Redis: r.redis.Addr(), DSN: pg.DSN(), Iters: iters, TTL: 300 * time.Millisecond,
		Work: 100 * time.Millisecond, Hold: 20 * time.Millisecond, Unfenced: unfenced}
	return r
}

// spawn starts a worker process doing iters iterations.
func (r *faultRun) spawn(iters int) string {
	cfg := r.base
	cfg.Name, cfg.Iters = r.NextName(), iters
	r.Spawn(cfg.Name, cfg)
	return cfg.Name
}

// faultResult is what the database and the workers' reports show.
type faultResult struct {
	writes        int // committed increments (rows of the log)
	counter       int64
	staleAccepted int // committed with a token below an earlier commit's
	lostUpdates   int // committed over a value another commit had replaced
	workerproc.Reports
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
	res.Reports = r.Tally(func(w string, i int) bool { return logged[[2]any{w, i}] })
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
	if res.AckedMissing != 0 || res.Acked > res.writes {
		t.Errorf("%d of %d acknowledged commits missing from %d logged", res.AckedMissing, res.Acked, res.writes)
	}
}

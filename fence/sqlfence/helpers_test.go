package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/dlockio/dlock/fence/sqlfence"
	"github.com/dlockio/dlock/internal/testkit/pgserver"
)

// testDB starts a PostgreSQL server with the side table and an orders table
// carrying a token column.
func testDB(t *testing.T) (*pgserver.Server, *sql.DB) {
	t.Helper()
	s := pgserver.Start(t)
	db := s.Open(t)
	ctx := testCtx(t)
	if err := sqlfence.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (
		id bigint PRIMARY KEY, status text NOT NULL DEFAULT 'new', fence_token bigint)`); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// backendPID returns the server process of tx's connection.
func backendPID(t *testing.T, ctx context.Context, tx *sql.Tx) int {
	t.Helper()
	var pid int
	if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitBlocked waits until backend pid is waiting for a lock: the signal that
// a concurrent statement is queued behind another transaction's row lock.
func waitBlocked(t *testing.T, ctx context.Context, db *sql.DB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var wait sql.NullString
		err := db.QueryRowContext(ctx, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid).Scan(&wait)
		if err != nil {
			t.Fatal(err)
		}
		if wait.String == "Lock" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d never waited for a lock (wait event %q)", pid, wait.String)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func highest(t *testing.T, ctx context.Context, db *sql.DB, resource string) int64 {
	t.Helper()
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT token FROM dlock_fence WHERE resource = $1", resource).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

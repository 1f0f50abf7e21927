package sqlonce_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/pgserver"
)

// TestPGServerStartRestartKill: the test kit itself (internal/testkit/pgserver, whose module has no
// PostgreSQL driver): data committed before a stop or a kill is there
// after the restart, on the same port; while stopped, queries fail.
func TestPGServerStartRestartKill(t *testing.T) {
	s := pgserver.Start(t)
	db := s.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	port := s.Port()
	count := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, fault := range []func(){func() { s.Stop(t) }, func() { s.Kill(t) }} {
		if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		fault()
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.QueryRowContext(qctx, "SELECT 1").Scan(new(int))
		qcancel()
		if err == nil {
			t.Fatalf("fault %d: a query succeeded while the server was down", i)
		}
		s.Restart(t)
		if s.Port() != port {
			t.Fatalf("restart moved the port from %d to %d", port, s.Port())
		}
		// The pool may hand out a connection to the old server first.
		var n int
		for try := 0; ; try++ {
			err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n)
			if err == nil {
				break
			}
			if try == 10 || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("after restart: %v", err)
			}
		}
		if got := count(); got != i+1 {
			t.Fatalf("fault %d: %d rows after restart, want %d", i, got, i+1)
		}
	}
}

// TestPGServerTwoServers: servers of two tests do not share anything.
func TestPGServerTwoServers(t *testing.T) {
	a, b := pgserver.Start(t), pgserver.Start(t)
	if a.Port() == b.Port() {
		t.Fatal("two servers on one port")
	}
	ctx := context.Background()
	if _, err := a.Open(t).ExecContext(ctx, "CREATE TABLE only_a (v int)"); err != nil {
		t.Fatal(err)
	}
	err := b.Open(t).QueryRowContext(ctx, "SELECT count(*) FROM only_a").Scan(new(int))
	if err == nil {
		t.Fatal("server b sees server a's table")
	}
}

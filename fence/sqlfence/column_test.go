package sqlfence_test

import (
	"errors"
	"math"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/sqlfence"
)

var orders = sqlfence.Column{Table: "orders", Key: "id", Token: "fence_token"}

func TestColumnAdvance(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.ExecContext(ctx, "INSERT INTO orders (id) VALUES (42)"); err != nil { // token NULL
		t.Fatal(err)
	}
	for _, tok := range []fence.Token{0, 4, 4, 6} {
		if err := orders.Advance(ctx, db, 42, tok); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := orders.Advance(ctx, db, 42, 5)
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStaleToken) ||
		*stale != (fence.StaleTokenError{Resource: "42", Token: 5, Highest: 6}) {
		t.Fatalf("token 5 after 6: %v", err)
	}
	var stored int64
	if err := db.QueryRowContext(ctx, "SELECT fence_token FROM orders WHERE id = 42").Scan(&stored); err != nil || stored != 6 {
		t.Fatalf("stored token %d (%v), want 6", stored, err)
	}
	if err := orders.Advance(ctx, db, 7, 1); !errors.Is(err, sqlfence.ErrNoRow) {
		t.Fatalf("missing row: %v", err)
	}
	if err := orders.Advance(ctx, db, 42, math.MaxInt64+1); !errors.Is(err, sqlfence.ErrTokenRange) {
		t.Fatalf("huge token: %v", err)
	}
	if err := (sqlfence.Column{Table: "orders", Key: "id"}).Advance(ctx, db, 42, 1); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("no token column: %v", err)
	}
}

// TestColumnQuoting: names are identifiers, never SQL.
func TestColumnQuoting(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	for _, q := range []string{
		`CREATE SCHEMA shop`,
		`CREATE TABLE shop."Odd ""Name""" ("Key" text PRIMARY KEY, "tok; DROP TABLE orders" bigint NOT NULL DEFAULT 0)`,
		`INSERT INTO shop."Odd ""Name""" ("Key") VALUES ('a')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	odd := sqlfence.Column{Table: `shop.Odd "Name"`, Key: "Key", Token: "tok; DROP TABLE orders"}
	if err := odd.Advance(ctx, db, "a", 3); err != nil {
		t.Fatal(err)
	}
	if err := odd.Advance(ctx, db, "a", 2); !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("stale on the odd table: %v", err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(new(int)); err != nil {
		t.Fatalf("orders is gone: %v", err)
	}
}

// TestColumnSerializes: as for the side table, a second transaction waits
// for the first's row lock, and is refused if the first committed a higher
// token.
func TestColumnSerializes(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.ExecContext(ctx, "INSERT INTO orders (id, fence_token) VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	a, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback()
	if err := orders.Advance(ctx, a, 1, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ExecContext(ctx, "UPDATE orders SET status = 'by 9' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	b, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback()
	pid := backendPID(t, ctx, b)
	done := make(chan error, 1)
	go func() { done <- orders.Advance(ctx, b, 1, 8) }()
	waitBlocked(t, ctx, db, pid)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, fence.ErrStaleToken) {
		t.Fatalf("token 8 after 9 committed: %v", err)
	}
}

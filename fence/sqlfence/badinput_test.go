package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence/sqlfence"
)

// A nil ctx or a nil database, transaction or connection is refused with
// ErrInvalidArgument by every function, never a panic; and the DB stays
// usable afterwards. Before, a nil ctx panicked inside database/sql while
// it held the DB's lock, and every later call on the DB (Close included)
// blocked forever.
func TestNilContextAndDatabase(t *testing.T) {
	_, db := testDB(t)
	ctx := testCtx(t)
	col := sqlfence.Column{Table: "orders", Key: "id", Token: "fence_token"}
	var nilCtx context.Context
	var nilDB *sql.DB
	var nilTx *sql.Tx
	noop := func(*sql.Tx) error { return nil }
	for name, call := range map[string]func() error{
		"Advance, nil ctx":         func() error { return sqlfence.Advance(nilCtx, db, "r", 1) },
		"Advance, nil querier":     func() error { return sqlfence.Advance(ctx, nil, "r", 1) },
		"Advance, nil *sql.Tx":     func() error { return sqlfence.Advance(ctx, nilTx, "r", 1) },
		"InTx, nil ctx":            func() error { return sqlfence.InTx(nilCtx, db, "r", 1, noop) },
		"InTx, nil db":             func() error { return sqlfence.InTx(ctx, nilDB, "r", 1, noop) },
		"CreateTable, nil ctx":     func() error { return sqlfence.CreateTable(nilCtx, db) },
		"CreateTable, nil execer":  func() error { return sqlfence.CreateTable(ctx, nil) },
		"CreateTable, nil *sql.DB": func() error { return sqlfence.CreateTable(ctx, nilDB) },
		"Column.Advance, nil ctx":  func() error { return col.Advance(nilCtx, db, 1, 1) },
		"Column.Advance, nil q":    func() error { return col.Advance(ctx, nil, 1, 1) },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panic %v", name, p)
				}
			}()
			if err := call(); !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
			}
		}()
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		t.Errorf("the DB after the bad calls: %v", err)
	}
}

package sqlfence_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/sqlfence"
)

// The three-line use: the order's update commits only if no newer holder of
// the lock has written first. (It needs a PostgreSQL server, so it is
// compiled, not run; the tests run the same on a real one.)
func ExampleInTx() {
	var (
		locker *dlock.Client // from redisdriver.Open
		db     *sql.DB       // sql.Open("pgx", dsn) or sql.Open("postgres", dsn)
	)
	ctx := context.Background()
	err := fence.Do(ctx, locker, "order:42", func(ctx context.Context, tok fence.Token) error {
		return sqlfence.InTx(ctx, db, "order:42", tok, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'paid' WHERE id = 42")
			return err
		})
	})
	if err != nil {
		log.Print(err) // errors.Is(err, fence.ErrStaleToken): a newer holder got there first
	}
}

// The token on the protected row itself, in a transaction of your own.
func ExampleColumn_Advance() {
	var (
		locker *dlock.Client // from redisdriver.Open
		db     *sql.DB       // sql.Open("pgx", dsn) or sql.Open("postgres", dsn)
	)
	ctx := context.Background()
	orders := sqlfence.Column{Table: "orders", Key: "id", Token: "fence_token"}
	err := fence.Do(ctx, locker, "order:42", func(ctx context.Context, tok fence.Token) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := orders.Advance(ctx, tx, 42, tok); err != nil {
			return err // fence.ErrStaleToken, or sqlfence.ErrNoRow
		}
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET status = 'paid' WHERE id = 42"); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		log.Print(err)
	}
}

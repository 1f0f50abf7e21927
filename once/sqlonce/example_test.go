package sqlonce_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/sqlonce"
)

// Ship an order exactly once: the shipment row and the completion of the
// order's record commit in one transaction. (Needs a PostgreSQL database
// and a lock Client, so it is not run here; the fault tests run the same
// code against real servers.)
func ExampleDoTx() {
	var db *sql.DB           // sql.Open("pgx", dsn)
	var locker *dlock.Client // redisdriver.Open(url)
	ctx := context.Background()
	if err := sqlonce.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
	store, _ := sqlonce.New(db)
	p, _ := once.New(locker, store)
	res, err := sqlonce.DoTx(ctx, p, db, "order:42", []byte(`{"order":42}`), func(ctx context.Context, tx *sql.Tx, token uint64) ([]byte, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO shipments (order_id, token) VALUES ($1, $2)`, 42, int64(token))
		return []byte("shipped"), err
	})
	if err != nil {
		log.Fatal(err) // once.ErrPayloadMismatch, once.ErrClaimLost, the function's error...
	}
	_ = res.Replayed // true for a duplicate: nothing was written again
}

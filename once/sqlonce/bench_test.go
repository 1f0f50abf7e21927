package sqlonce_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/pgserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/sqlonce"
	"github.com/dlockio/dlock/redisdriver"
)

// benchSetup returns a Processor with locks on a real redis-server and
// records in a real PostgreSQL, and the database.
func benchSetup(b *testing.B) (*once.Processor, *sql.DB) {
	pg := pgserver.Start(b)
	db := pg.Open(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sqlonce.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_effects (k text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	drv, err := redisdriver.New(redisserver.Start(b).Client(b))
	if err != nil {
		b.Fatal(err)
	}
	locks, err := dlock.New(drv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = locks.Close() })
	store, _ := sqlonce.New(db)
	p, _ := once.New(locks, store)
	return p, db
}

// A first delivery with Do: lock, claim, complete, unlock.
func BenchmarkDoFirst(b *testing.B) {
	p, _ := benchSetup(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := p.Do(ctx, fmt.Sprint("k", i), nil, func(context.Context, uint64) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// A first delivery with DoTx: lock, claim, BEGIN, the work's INSERT,
// complete, COMMIT, unlock.
func BenchmarkDoTxFirst(b *testing.B) {
	p, db := benchSetup(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		k := fmt.Sprint("k", i)
		if _, err := sqlonce.DoTx(ctx, p, db, k, nil, func(ctx context.Context, tx *sql.Tx, _ uint64) ([]byte, error) {
			_, err := tx.ExecContext(ctx, `INSERT INTO bench_effects (k) VALUES ($1)`, k)
			return nil, err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// A duplicate of a completed delivery: lock, claim (refused) and the read
// of the row that refused, unlock.
func BenchmarkDoDuplicate(b *testing.B) {
	p, _ := benchSetup(b)
	ctx := context.Background()
	work := func(context.Context, uint64) ([]byte, error) { return []byte("ok"), nil }
	if _, err := p.Do(ctx, "k", nil, work); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if r, err := p.Do(ctx, "k", nil, work); err != nil || !r.Replayed {
			b.Fatal(r, err)
		}
	}
}

package sqlonce_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/sqlonce"
	"github.com/dlockio/dlock/redisdriver"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// workerEnv carries a worker's configuration (JSON) to the re-executed
// test binary.
const workerEnv = "SQLONCE_FAULT_WORKER"

// workerConfig is what the harness hands a worker process.
type workerConfig struct {
	Name   string   `json:"name"`
	Redis  string   `json:"redis"`
	DSN    string   `json:"dsn"`
	Orders []string `json:"orders"`
	HoldAt string   `json:"hold_at,omitempty"` // after this order's effect, wait for a line on stdin
	// IgnoreLease runs the transaction on a context that does not end with
	// the lease, as careless code would: only the store's token check then
	// stands between a resumed worker and a second shipment.
	IgnoreLease bool          `json:"ignore_lease,omitempty"`
	TTL         time.Duration `json:"ttl"`
	GiveUp      time.Duration `json:"give_up"`
	Backoff     time.Duration `json:"backoff"`
}

// Worker events (workerproc.Event, Key the order), one JSON line each on
// stdout.
const (
	evEffect = "effect" // the shipment row was inserted (not committed)
	evDone   = "done"   // Do returned a result (Replayed: a duplicate)
	evLost   = "lost"   // the claim was lost; the order is delivered again
	evErr    = "err"    // a store failure; the order is delivered again
	evExit   = "exit"   // the worker processed all its orders
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(runWorker(cfg))
	}
	os.Exit(m.Run())
}

// runWorker is a worker process: it delivers each of its orders until
// DoTx returns a result — as a queue redelivers a message until it is
// acknowledged. Shipping an order inserts one row into shipments, in the
// transaction that completes the record.
func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	emit := workerproc.Emitter(cfg.Name)
	locker, err := redisdriver.Open("redis://"+cfg.Redis, dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		dlock.WithDefaultTTL(cfg.TTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer locker.Close()
	db, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer db.Close()
	store, _ := sqlonce.New(db)
	p, err := once.New(locker, store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	stdin := bufio.NewReader(os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.GiveUp)
	defer cancel()
	for _, order := range cfg.Orders {
		for {
			ship := func(ctx context.Context, tx *sql.Tx, token uint64) ([]byte, error) {
				if _, err := tx.ExecContext(ctx, `INSERT INTO shipments (order_id, token) VALUES ($1, $2)`, order, int64(token)); err != nil {
					return nil, err
				}
				emit(workerproc.Event{K: evEffect, Key: order, Tok: token})
				if order == cfg.HoldAt {
					_, _ = stdin.ReadString('\n') // the harness stops or kills us here
				}
				return []byte(fmt.Sprint("shipped under ", token)), nil
			}
			var res once.Result
			if cfg.IgnoreLease {
				res, err = doIgnoringLease(ctx, p, db, order, ship)
			} else {
				res, err = sqlonce.DoTx(ctx, p, db, order, []byte("ship "+order), ship)
			}
			if err == nil {
				emit(workerproc.Event{K: evDone, Key: order, Tok: res.Token, Replayed: res.Replayed})
				break
			}
			if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "gave up:", err)
				return 1
			}
			kind := evErr
			if errors.Is(err, once.ErrClaimLost) || errors.Is(err, dlock.ErrLockLost) || errors.Is(err, context.Canceled) {
				kind = evLost
			}
			emit(workerproc.Event{K: kind, Key: order, Err: err.Error()})
			time.Sleep(cfg.Backoff) // redelivery delay, as a queue's
		}
	}
	emit(workerproc.Event{K: evExit})
	return 0
}

// doIgnoringLease is DoTx written by hand with a transaction that ignores
// the claim's context.
func doIgnoringLease(ctx context.Context, p *once.Processor, db *sql.DB, order string, fn sqlonce.TxFunc) (once.Result, error) {
	c, res, err := p.Begin(ctx, order, []byte("ship "+order))
	if err != nil || c == nil {
		return res, err
	}
	defer c.Release(ctx)
	bg := context.WithoutCancel(ctx)
	tx, err := db.BeginTx(bg, nil)
	if err != nil {
		return once.Result{}, err
	}
	defer tx.Rollback()
	v, err := fn(bg, tx, c.Token())
	if err != nil {
		return once.Result{}, err
	}
	if err := sqlonce.CompleteTx(bg, tx, c, v); err != nil {
		return once.Result{}, err
	}
	return once.Result{Value: v, Token: c.Token()}, tx.Commit()
}

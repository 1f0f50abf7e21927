package sqlfence_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/sqlfence"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/redisdriver"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// workerEnv carries a worker's JSON configuration.
const workerEnv = "DLOCK_SQLFENCE_WORKER"

// workerConfig is what the harness hands a worker process.
type workerConfig struct {
	Name  string        `json:"name"`
	Redis string        `json:"redis"` // the lock store, host:port
	DSN   string        `json:"dsn"`   // the protected database
	Iters int           `json:"iters"` // increments to attempt (committed or refused)
	TTL   time.Duration `json:"ttl"`
	Work  time.Duration `json:"work"` // between the fenced read and the fenced write
	// Hold is how long the write transaction stays open before COMMIT: the
	// window a kill after "write" lands in.
	Hold time.Duration `json:"hold"`
	// Unfenced skips the guard (plain transactions): the canary that shows
	// the harness can see a stale write.
	Unfenced bool `json:"unfenced,omitempty"`
}

// Worker events (workerproc.Event, one JSON line each on stdout):
//
//	read   the fenced read returned V (tx 1 committed); the harness may pause here
//	write  tx 2 updated the counter; COMMIT follows after cfg.Hold
//	commit the increment V committed; Lost says whether the lease had ended
//	stale  the fenced write was refused (ErrStaleToken); Lost as above
//	err    a call failed (the database restarting, say); retried
//	done   all iterations attempted

// fenceResource is the resource name every worker fences on.
const fenceResource = "counter"

// workerMain is a worker process: it increments the counter row through
// fenced read-modify-writes under a dlock lock, reporting every step.
func workerMain(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	emit := workerproc.Emitter(cfg.Name)
	ctx := context.Background()
	locker, err := redisdriver.Open("redis://"+cfg.Redis, dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
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

	workerproc.Iterate(emit, cfg.Iters, func(i int) (bool, error) {
		return increment(ctx, locker, db, cfg, i, emit)
	})
	return 0
}

// increment is one iteration: lock; tx 1 fences and reads the counter;
// work; tx 2 fences again, writes counter+1 and logs the write; unlock. It
// reports whether the iteration ended (committed or refused as stale).
func increment(ctx context.Context, locker *dlock.Client, db *sql.DB, cfg workerConfig, i int, emit func(workerproc.Event)) (bool, error) {
	lease, err := locker.Lock(ctx, "job", dlock.WithTTL(cfg.TTL))
	if err != nil {
		return false, err
	}
	defer func() { _ = lease.Unlock(ctx) }()
	tok := lease.Token()
	inTx := func(fn func(tx *sql.Tx) error) error { return sqlfence.InTx(ctx, db, fenceResource, tok, fn) }
	if cfg.Unfenced {
		inTx = func(fn func(tx *sql.Tx) error) error { return plainTx(ctx, db, fn) }
	}

	// The read is fenced too: registering the token on the read is what
	// stops an older holder from writing between this read and this write.
	var v int64
	err = inTx(func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT v FROM counter WHERE id = 1").Scan(&v)
	})
	if errors.Is(err, fence.ErrStaleToken) {
		emit(workerproc.Event{K: "stale", I: i, Tok: tok, Lost: lease.Err() != nil})
		return true, nil
	}
	if err != nil {
		return false, err
	}
	emit(workerproc.Event{K: "read", I: i, Tok: tok, V: v})
	time.Sleep(cfg.Work) // the work; a pause of the whole process lands here

	// No lease check here on purpose: the process may have been paused
	// right after its last check, and the write must be refused anyway.
	err = inTx(func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE counter SET v = $1 WHERE id = 1", v+1); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO writes (worker, iter, token, before, after) VALUES ($1, $2, $3, $4, $5)",
			cfg.Name, i, int64(tok), v, v+1); err != nil {
			return err
		}
		emit(workerproc.Event{K: "write", I: i, Tok: tok, V: v + 1})
		// More work before COMMIT: a kill after "write" lands inside the
		// transaction.
		time.Sleep(cfg.Hold)
		return nil
	})
	lost := lease.Err() != nil
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		emit(workerproc.Event{K: "stale", I: i, Tok: tok, Lost: lost})
		return true, nil
	case err != nil:
		return false, err
	}
	emit(workerproc.Event{K: "commit", I: i, Tok: tok, V: v + 1, Lost: lost})
	return true, nil
}

// plainTx is InTx without the guard.
func plainTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Package sqlonce is a once.Store in PostgreSQL, through database/sql (pgx's
// stdlib driver and lib/pq both work): one row per record in the table
// dlock_once (migrate.sql), changed only by single statements that compare
// fencing tokens in the server.
//
// CompleteTx and DoTx go further than any Store: they complete the record
// in the caller's transaction, so the work's own writes and the completion
// commit together or not at all — exactly once for side effects in the same
// database, even when the worker dies or is paused between them.
//
// sqlonce is a module of its own, github.com/dlockio/dlock/once/sqlonce,
// so that pgx, the driver its tests and examples run on, stays out of
// the root module's dependencies.
package sqlonce

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/once"
)

// Migration is the SQL that creates the table and its index (migrate.sql).
//
//go:embed migrate.sql
var Migration string

// Migrate runs Migration on db. It is safe to run again.
func Migrate(ctx context.Context, db *sql.DB) error {
	if db == nil || ctx == nil {
		return fmt.Errorf("%w: nil db or context", once.ErrInvalidArgument)
	}
	_, err := db.ExecContext(ctx, Migration)
	return classify(ctx, "migrate", "", err)
}

// Store implements once.Store on a *sql.DB whose database has the table.
type Store struct {
	db *sql.DB
}

var _ once.Store = (*Store)(nil)

// New returns a Store on db. The application keeps and closes db.
func New(db *sql.DB) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil db", once.ErrInvalidArgument)
	}
	return &Store{db: db}, nil
}

func check(ctx context.Context, key string, token uint64, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: nil context", once.ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", once.ErrInvalidArgument)
	case !utf8.ValidString(key) || strings.IndexByte(key, 0) >= 0:
		// PostgreSQL text holds neither a NUL nor invalid UTF-8.
		return fmt.Errorf("%w: key %q is not text PostgreSQL can store (invalid UTF-8 or a NUL byte)", once.ErrInvalidArgument, key)
	case ttl < time.Millisecond:
		return fmt.Errorf("%w: ttl %v, below 1 ms", once.ErrInvalidArgument, ttl)
	case token > math.MaxInt64:
		return fmt.Errorf("%w: token %d does not fit a bigint", once.ErrInvalidArgument, token)
	}
	return nil
}

// scan reads a row of claimSQL or getSQL.
func scan(key string, row *sql.Row) (once.Record, error) {
	var (
		state int
		token int64
		rec   = once.Record{Key: key}
	)
	if err := row.Scan(&state, &token, &rec.PayloadHash, &rec.Result, &rec.ExpiresAt); err != nil {
		return once.Record{}, err
	}
	rec.State, rec.Token = once.State(state), uint64(token)
	return rec, nil
}

// Claim implements once.Store: one statement when it claims, two when it
// refuses (the second reads the row that refused).
func (s *Store) Claim(ctx context.Context, key string, token uint64, hash []byte, ttl time.Duration) (once.Record, bool, error) {
	if err := check(ctx, key, token, ttl); err != nil {
		return once.Record{}, false, err
	}
	// The row that refused can expire or be purged before the read; the
	// claim is then tried again.
	for range 3 {
		rec, err := scan(key, s.db.QueryRowContext(ctx, claimSQL, key, int64(token), hash, ttl.Milliseconds()))
		if err == nil {
			return rec, true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return once.Record{}, false, classify(ctx, "claim", key, err)
		}
		rec, err = scan(key, s.db.QueryRowContext(ctx, getSQL, key))
		if err == nil {
			return rec, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return once.Record{}, false, classify(ctx, "claim", key, err)
		}
	}
	return once.Record{}, false, classify(ctx, "claim", key, errors.New("the row changed under three attempts in a row"))
}

// Complete implements once.Store.
func (s *Store) Complete(ctx context.Context, key string, token uint64, result []byte, ttl time.Duration) error {
	return finish(ctx, s.db, "complete", key, token, once.Completed, result, ttl)
}

// Fail implements once.Store.
func (s *Store) Fail(ctx context.Context, key string, token uint64, ttl time.Duration) error {
	return finish(ctx, s.db, "fail", key, token, once.Failed, nil, ttl)
}

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func finish(ctx context.Context, db Execer, op, key string, token uint64, to once.State, result []byte, ttl time.Duration) error {
	if err := check(ctx, key, token, ttl); err != nil {
		return err
	}
	if result == nil && to == once.Completed {
		result = []byte{} // NULL is "no result yet"
	}
	res, err := db.ExecContext(ctx, finishSQL, key, int64(token), int(to), result, ttl.Milliseconds())
	if err != nil {
		return classify(ctx, op, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return classify(ctx, op, key, err)
	}
	if n != 1 {
		return fmt.Errorf("%w: key %q, token %d", once.ErrClaimLost, key, token)
	}
	return nil
}

// Get implements once.Store.
func (s *Store) Get(ctx context.Context, key string) (once.Record, bool, error) {
	if err := check(ctx, key, 0, time.Millisecond); err != nil {
		return once.Record{}, false, err
	}
	rec, err := scan(key, s.db.QueryRowContext(ctx, getSQL, key))
	if errors.Is(err, sql.ErrNoRows) {
		return once.Record{}, false, nil
	}
	if err != nil {
		return once.Record{}, false, classify(ctx, "get", key, err)
	}
	return rec, true, nil
}

// DeleteExpired deletes the rows past their expiry and returns how many.
// Expired rows are already ignored and overwritten; run it now and then
// (a cron job, a ticker) to keep the table small.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	if ctx == nil {
		return 0, fmt.Errorf("%w: nil context", once.ErrInvalidArgument)
	}
	res, err := s.db.ExecContext(ctx, purgeSQL)
	if err != nil {
		return 0, classify(ctx, "delete expired", "", err)
	}
	n, err := res.RowsAffected()
	return n, classify(ctx, "delete expired", "", err)
}

// classify turns a database error into the caller's ctx error or a
// backend failure (matching dlock.ErrBackend).
func classify(ctx context.Context, op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("sqlonce: %s %q: %w", op, key, ctx.Err())
	}
	return fmt.Errorf("sqlonce: %s %q: %w: %w", op, key, dlock.ErrBackend, err)
}

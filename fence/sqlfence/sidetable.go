package sqlfence

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
)

// Querier runs the guard's statements: a *sql.Tx is the intended one (the
// guard then commits or rolls back with the caller's writes); *sql.Conn and
// *sql.DB work too, but with autocommit the check binds no later write.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Execer runs a migration: *sql.DB, *sql.Conn, *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var (
	// ErrTokenRange is returned for a token above math.MaxInt64, which a
	// bigint column cannot hold. It matches dlock.ErrInvalidArgument.
	ErrTokenRange = fmt.Errorf("%w: fencing token above the largest bigint", dlock.ErrInvalidArgument)
	// ErrNoRow is returned by Column.Advance when the protected row does not
	// exist. It matches sql.ErrNoRows too.
	ErrNoRow = fmt.Errorf("sqlfence: the protected row does not exist: %w", sql.ErrNoRows)
)

// UpMigration creates the side table (migrations/0001_dlock_fence.up.sql).
//
//go:embed migrations/0001_dlock_fence.up.sql
var UpMigration string

// DownMigration drops it (migrations/0001_dlock_fence.down.sql).
//
//go:embed migrations/0001_dlock_fence.down.sql
var DownMigration string

// CreateTable runs UpMigration: it creates dlock_fence if it does not exist.
// Applications with their own migration tool apply the .sql files instead.
func CreateTable(ctx context.Context, db Execer) error {
	if err := checkCall(ctx, db); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, UpMigration)
	return err
}

// The statements Advance runs. The INSERT takes the resource's row lock even
// when its WHERE refuses the update (PostgreSQL locks the conflicting row for
// ON CONFLICT DO UPDATE either way), so a stale transaction also waits for
// the one ahead of it and then reads a settled high-water mark.
const (
	advanceSQL = `INSERT INTO dlock_fence AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token
RETURNING f.token`
	highestSQL = `SELECT token FROM dlock_fence WHERE resource = $1`
)

// Advance records tok as seen for resource in the side table, in q's
// transaction, and returns nil if tok is not lower than the highest token
// seen; the resource's row then stays locked until the transaction ends, so
// the writes that follow in the same transaction are fenced. A resource
// name PostgreSQL text cannot hold (a NUL byte, invalid UTF-8) is
// dlock.ErrInvalidArgument. A lower token
// returns a *fence.StaleTokenError (matching fence.ErrStaleToken) and the
// caller must roll back. The first Advance for a resource inserts its row.
func Advance(ctx context.Context, q Querier, resource string, tok fence.Token) error {
	if err := checkCall(ctx, q); err != nil {
		return err
	}
	v, err := checkToken(tok)
	if err != nil {
		return err
	}
	if resource == "" {
		return fmt.Errorf("%w: empty resource name", dlock.ErrInvalidArgument)
	}
	if !utf8.ValidString(resource) || strings.IndexByte(resource, 0) >= 0 {
		// Lock names are bytes; PostgreSQL text holds neither a NUL nor
		// invalid UTF-8, and would refuse the query with a bare error.
		return fmt.Errorf("%w: resource name %q is not text PostgreSQL can store (invalid UTF-8 or a NUL byte)", dlock.ErrInvalidArgument, resource)
	}
	var got int64
	err = q.QueryRowContext(ctx, advanceSQL, resource, v).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlfence: advance %q: %w", resource, err)
	}
	// The row exists with a higher token, and is locked by us now.
	var highest int64
	if err := q.QueryRowContext(ctx, highestSQL, resource).Scan(&highest); err != nil {
		return fmt.Errorf("sqlfence: read the high-water mark of %q: %w", resource, err)
	}
	return fence.Stale(resource, tok, fence.Token(highest))
}

// InTx runs fn in a new transaction of db that first calls Advance for
// resource, and commits if fn returns nil. It rolls back and returns the
// error when Advance refuses the token (matching fence.ErrStaleToken; fn is
// not called) or fn fails.
func InTx(ctx context.Context, db *sql.DB, resource string, tok fence.Token, fn func(tx *sql.Tx) error) error {
	if fn == nil {
		return fmt.Errorf("%w: nil function", dlock.ErrInvalidArgument)
	}
	if err := checkCall(ctx, db); err != nil {
		return err
	}
	if _, err := checkToken(tok); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", err)
	}
	// Rolls back on every way out but a commit, a panic in fn included; a
	// no-op after Commit.
	defer func() { _ = tx.Rollback() }()
	if err := Advance(ctx, tx, resource, tok); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", err)
	}
	return nil
}

// checkCall refuses what would make database/sql panic: a nil ctx (which
// it dereferences holding the DB's lock, leaving every later call on that
// DB blocked) and a nil database, connection or transaction.
func checkCall(ctx context.Context, db any) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument)
	}
	var none bool
	switch v := db.(type) {
	case nil:
		none = true
	case *sql.DB:
		none = v == nil
	case *sql.Tx:
		none = v == nil
	case *sql.Conn:
		none = v == nil
	}
	if none {
		return fmt.Errorf("%w: nil database", dlock.ErrInvalidArgument)
	}
	return nil
}

func checkToken(tok fence.Token) (int64, error) {
	if tok > math.MaxInt64 {
		return 0, fmt.Errorf("%w: %d", ErrTokenRange, tok)
	}
	return int64(tok), nil
}

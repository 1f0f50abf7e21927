package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
)

// Column is a fencing token column on the protected row: the row's own
// high-water mark, for a resource that is one row. The column must be a
// bigint; NULL counts as 0. The names are SQL identifiers, quoted as given
// (case-sensitive; a dot separates schema and table):
//
//	ALTER TABLE orders ADD COLUMN fence_token bigint NOT NULL DEFAULT 0;
//	orders := sqlfence.Column{Table: "orders", Key: "id", Token: "fence_token"}
type Column struct {
	Table string // the protected table, optionally schema-qualified: "shop.orders"
	Key   string // the column that identifies the row (its primary key, say)
	Token string // the bigint column holding the highest token seen
}

// Advance records tok as seen on the row whose Key column equals key, in
// q's transaction, and returns nil if tok is not lower than the token
// stored on the row; the row then stays locked until the transaction ends,
// so the writes to it that follow in the same transaction are fenced. A
// lower token returns a *fence.StaleTokenError (its Resource is the key as
// text) and the caller must roll back; a missing row returns ErrNoRow.
//
// It runs, with the identifiers quoted:
//
//	UPDATE orders SET fence_token = $2 WHERE id = $1 AND COALESCE(fence_token, 0) <= $2 RETURNING fence_token
//
// and only when that updates nothing, to tell a stale token from a missing
// row:
//
//	SELECT COALESCE(fence_token, 0) FROM orders WHERE id = $1 FOR UPDATE
func (c Column) Advance(ctx context.Context, q Querier, key any, tok fence.Token) error {
	if err := checkCall(ctx, q); err != nil {
		return err
	}
	v, err := checkToken(tok)
	if err != nil {
		return err
	}
	table, kcol, tcol, err := c.quoted()
	if err != nil {
		return err
	}
	update := fmt.Sprintf("UPDATE %s SET %s = $2 WHERE %s = $1 AND COALESCE(%s, 0) <= $2 RETURNING %s", table, tcol, kcol, tcol, tcol)
	var got int64
	err = q.QueryRowContext(ctx, update, key, v).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlfence: advance %s %v: %w", c.Table, key, err)
	}
	// Either the row is missing or its token is higher. Lock it to find out
	// which: under the lock the answer cannot change any more.
	var highest int64
	err = q.QueryRowContext(ctx, fmt.Sprintf("SELECT COALESCE(%s, 0) FROM %s WHERE %s = $1 FOR UPDATE", tcol, table, kcol), key).Scan(&highest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s where %s = %v", ErrNoRow, c.Table, c.Key, key)
	case err != nil:
		return fmt.Errorf("sqlfence: read the token of %s %v: %w", c.Table, key, err)
	case fence.Token(highest) > tok:
		return fence.Stale(fmt.Sprint(key), tok, fence.Token(highest))
	}
	// The row appeared between the two statements with a token not above
	// ours; it is locked now, so the update cannot miss again.
	if err := q.QueryRowContext(ctx, update, key, v).Scan(&got); err != nil {
		return fmt.Errorf("sqlfence: advance %s %v: %w", c.Table, key, err)
	}
	return nil
}

func (c Column) quoted() (table, key, token string, err error) {
	if c.Table == "" || c.Key == "" || c.Token == "" {
		return "", "", "", fmt.Errorf("%w: sqlfence.Column needs Table, Key and Token", dlock.ErrInvalidArgument)
	}
	parts := strings.Split(c.Table, ".")
	for i, p := range parts {
		if parts[i], err = quoteIdent(p); err != nil {
			return "", "", "", err
		}
	}
	if key, err = quoteIdent(c.Key); err != nil {
		return "", "", "", err
	}
	if token, err = quoteIdent(c.Token); err != nil {
		return "", "", "", err
	}
	return strings.Join(parts, "."), key, token, nil
}

// quoteIdent quotes a SQL identifier, so a name can never be read as SQL.
func quoteIdent(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: SQL identifier %q", dlock.ErrInvalidArgument, name)
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`, nil
}

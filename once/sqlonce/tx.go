package sqlonce

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/once"
)

// CompleteTx completes c's record inside tx, the transaction that made the
// work's own writes: they commit together or not at all. It returns
// once.ErrClaimLost when a newer worker claimed the key (the caller must
// then roll back, so none of its writes land). After a commit, end the
// claim with c.Release; a row locked by tx makes a newer worker's claim
// wait for the commit or rollback.
func CompleteTx(ctx context.Context, tx Execer, c *once.Claim, result []byte) error {
	if tx == nil || c == nil {
		return fmt.Errorf("%w: nil transaction or claim", once.ErrInvalidArgument)
	}
	return finish(ctx, tx, "complete", c.Key(), c.Token(), once.Completed, result, c.Retention())
}

// TxFunc is work whose writes go through tx; token is the claim's fencing
// token.
type TxFunc func(ctx context.Context, tx *sql.Tx, token uint64) ([]byte, error)

// DoTx is once.Processor.Do for work in the same database: it claims key
// with p, runs fn in a transaction on db, completes the record in that
// transaction and commits. A worker that dies or loses its claim before
// the commit leaves nothing behind; one that committed cannot be run again
// for the key. When fn returns an error the transaction is rolled back,
// the record marked Failed, and fn's error returned.
//
// p must keep its records in db (a Store from New(db)).
func DoTx(ctx context.Context, p *once.Processor, db *sql.DB, key string, payload []byte, fn TxFunc) (once.Result, error) {
	if p == nil || db == nil || fn == nil {
		return once.Result{}, fmt.Errorf("%w: nil processor, db or function", once.ErrInvalidArgument)
	}
	c, res, err := p.Begin(ctx, key, payload)
	if err != nil || c == nil {
		return res, err
	}
	defer c.Release(context.WithoutCancel(ctx))
	v, err := runTx(c.Context(), db, c, fn)
	if err != nil {
		if errors.Is(err, once.ErrClaimLost) {
			return once.Result{}, err
		}
		// Record the failure, so the next delivery runs the work again.
		// Refused (ErrClaimLost) when a newer worker has the key: the
		// joined error says so.
		if ferr := c.Fail(context.WithoutCancel(ctx)); ferr != nil {
			return once.Result{}, errors.Join(err, ferr)
		}
		return once.Result{}, err
	}
	return once.Result{Value: v, Token: c.Token()}, nil
}

// runTx runs fn and the completion in one transaction. Its ctx is the
// claim's: a lost lease aborts the transaction before the commit.
func runTx(ctx context.Context, db *sql.DB, c *once.Claim, fn TxFunc) ([]byte, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, classify(ctx, "begin", c.Key(), err)
	}
	defer tx.Rollback()
	v, err := fn(ctx, tx, c.Token())
	if err != nil {
		return nil, err
	}
	if err := CompleteTx(ctx, tx, c, v); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, classify(ctx, "commit", c.Key(), err)
	}
	return v, nil
}

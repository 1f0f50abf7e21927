// Package sqlfence makes a SQL database reject writes from stale lock
// holders: a guarded write succeeds only if its fencing token is not lower
// than the highest token seen for the resource, and it runs in the caller's
// transaction, so the check and the write commit — or roll back — together.
//
// It uses only database/sql, with PostgreSQL's SQL and $n placeholders, so
// both the pgx stdlib driver and lib/pq work. The high-water mark lives in
// one of two places:
//
//   - a side table, dlock_fence (resource text primary key, token bigint),
//     for any resource name: Advance, or InTx for the whole transaction.
//     Its schema is migrations/0001_dlock_fence.up.sql, also run by
//     CreateTable.
//   - a token column on the protected row itself: Column.Advance.
//
// Either way the statement locks the high-water mark's row until the
// transaction ends, so two transactions guarding the same resource are
// serialized under READ COMMITTED: the second waits for the first to commit,
// then compares its token with what the first wrote. A token equal to the
// highest is accepted (the same holder writing twice); a lower one returns
// a *fence.StaleTokenError, matching fence.ErrStaleToken, and the caller
// must roll back. Tokens are stored as bigint: a token above math.MaxInt64
// is refused with ErrTokenRange.
//
// The guard protects only the writes made in a transaction that called
// Advance (or ran through InTx) for the same resource; a write that skips it
// is not fenced.
//
// sqlfence is a module of its own, github.com/dlockio/dlock/fence/sqlfence,
// so that pgx, the driver its tests and examples run on, stays out of
// the root module's dependencies.
package sqlfence

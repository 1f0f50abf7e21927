package sqlonce

// The statements, one round trip each. Times are the server's
// clock_timestamp(), not now(): inside a long transaction (CompleteTx)
// now() is the transaction's start.
const (
	// claimSQL inserts an in-progress row, or overwrites one that is
	// expired, or has the same hash, is not completed and a token not
	// above ours. A row locked by a concurrent transaction (a CompleteTx
	// not yet committed) is waited for, and the condition is checked
	// again on its committed version.
	claimSQL = `INSERT INTO dlock_once AS r (key, state, token, payload_hash, result, expires_at)
VALUES ($1, 1, $2, $3, NULL, clock_timestamp() + $4::bigint * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE
SET state = 1, token = excluded.token, payload_hash = excluded.payload_hash, result = NULL, expires_at = excluded.expires_at
WHERE r.expires_at <= clock_timestamp()
   OR (r.payload_hash = excluded.payload_hash AND r.state <> 2 AND r.token <= excluded.token)
RETURNING state, token, payload_hash, result, expires_at`

	// getSQL reads a live row; after a refused claim it returns the row
	// that refused.
	getSQL = `SELECT state, token, payload_hash, result, expires_at FROM dlock_once
WHERE key = $1 AND expires_at > clock_timestamp()`

	// finishSQL moves a live in-progress row claimed under $2 to state $3.
	// The same call repeated (a retry after a lost reply) matches again
	// and changes nothing.
	finishSQL = `UPDATE dlock_once
SET result = CASE WHEN state = 1 THEN $4 ELSE result END,
    expires_at = CASE WHEN state = 1 THEN clock_timestamp() + $5::bigint * interval '1 millisecond' ELSE expires_at END,
    state = $3
WHERE key = $1 AND token = $2 AND (state = 1 OR state = $3) AND expires_at > clock_timestamp()`

	purgeSQL = `DELETE FROM dlock_once WHERE expires_at <= clock_timestamp()`
)

// Package once processes a message, request or job exactly once per
// idempotency key, even when it is delivered twice, its worker dies or is
// paused halfway, or two workers race.
//
// A Processor keeps one Record per key in a Store: its state (in progress,
// completed, failed), the fencing token of the worker that claimed it, a
// hash of the payload, the stored result, and an expiry. A worker claims a
// key under a dlock lock named after it, and the claim carries the lease's
// fencing token:
//
//   - While the lease lives, every duplicate either waits for it, or gets a
//     typed error (the caller's choice: WithDuplicates).
//   - When the lease is lost (crash, pause, partition) the claim ends with
//     it: the next worker takes the lock with a higher token and takes the
//     record over. The old worker can no longer complete it: the store
//     compares tokens atomically (ErrClaimLost).
//   - A completed record answers every later delivery with its stored
//     result, until its retention runs out; a reused key with a different
//     payload gets ErrPayloadMismatch.
//   - A failed record (the function returned an error) is retried by the
//     next delivery of the same payload.
//
// Stores, each under this package's directory:
//
//   - MemStore (this package, NewMemStore): in memory, for tests.
//   - package redisonce, github.com/dlockio/dlock/once/redisonce (in this
//     module): Redis.
//   - package sqlonce, module github.com/dlockio/dlock/once/sqlonce (a
//     module of its own, so that pgx stays out of this one): PostgreSQL.
//
// They pass the same conformance suite, package oncetest.
//
// What "exactly once" covers: the record and the stored result. A side
// effect outside the store is made once when it is guarded by the claim's
// token (package fence, or sqlonce's CompleteTx, which commits the
// effect and the completion in one transaction); an unguarded side effect
// can run twice when a worker loses its lease between the effect and the
// completion — the case no lock can close.
package once

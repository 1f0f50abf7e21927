// Package fence is the enforcing side of fencing tokens: the protected
// resource rejects a write that carries a token lower than the highest token
// it has seen, so a holder that was paused past its lease (GC, SIGSTOP, a VM
// stall) or whose packets were delayed cannot overwrite the work of the
// holder that came after it. No lock can stop such a holder; only the
// resource can.
//
// The common case is three lines: take the lock, pass the token to the
// guarded write, release.
//
//	err := fence.Do(ctx, locker, "order:42", func(ctx context.Context, tok fence.Token) error {
//		return guard.Apply(ctx, "order:42", tok, func(ctx context.Context) error { return save(ctx, order) })
//	})
//
// Guards, one per kind of resource, each under this package's directory:
//
//   - Memory (this package, NewMemory): for tests and for resources that
//     live in one process.
//   - package redisfence, github.com/dlockio/dlock/fence/redisfence (in
//     this module): fenced SET, HSET, INCRBY, DEL on Redis, one script each.
//   - package sqlfence, module github.com/dlockio/dlock/fence/sqlfence (a
//     module of its own, so that pgx stays out of this one): a guarded
//     write in the caller's SQL transaction.
//
// Any other resource implements Guard, or returns a StaleTokenError (made
// with Stale) from its own write path.
//
// A fence only protects the writes that go through it; a token equal to the
// highest seen is accepted (the same holder writing twice), and nothing here
// reads a clock.
package fence

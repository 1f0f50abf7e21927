// Package election elects one leader among processes, on dlock's public
// API, so it works on every driver: the leader is the holder of one lock,
// its term is that lease's fencing token.
//
//	e, _ := election.New(locker, "billing-leader", election.WithIdentity("billing-7"))
//	err := e.Run(ctx, func(ctx context.Context, term uint64) error {
//		return leadUntil(ctx, term) // pass term to every guarded write (package fence)
//	})
//
// What it promises, against the complaints about other election libraries:
//
//   - Only a process that won a campaign ever runs leader code or sees a
//     Leadership: there is no "stopped leading" callback that could fire
//     for a process that never led.
//   - The leader's context ends before its lease can expire: when the
//     lease ends (lost, released, Client closed) and, earlier, when
//     renewals have stalled until only the step-down margin is left
//     (WithStepDownMargin), so the leader's work has that long to stop
//     while no one else can lead yet.
//   - Run releases the lock only after the leader's function returned:
//     the next leader never overlaps with work the old one still does,
//     unless the old one is paused past its lease — which the term, as a
//     fencing token, lets the resource reject.
//   - Terms strictly increase, whoever wins, across expiry, forced
//     release and store restarts (the fencing-token guarantee of the
//     driver).
//
// Leader and Observe report the current leader of any process through
// Client.Inspect, so they need a driver with operator functions (Redis and
// the in-memory driver have them); Campaign, Resign and Run need only
// locks.
package election

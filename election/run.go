package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock"
)

// Run campaigns, runs fn as leader, and campaigns again when the term is
// lost, until ctx ends or fn returns by itself.
//
// fn gets the term's context (see Leadership.Context) and the term. It
// should run until its ctx ends; when it does, Run waits for fn to return
// and only then releases the lock, so the next leader starts after this
// one's work stopped. Then:
//
//   - ctx ended: Run returns an error matching ctx.Err() once fn returned
//     and the lock was released, waiting at most resignTimeout (5 s) for
//     a store that does not answer; the release then goes on in the
//     background (and the lock expires with its TTL if it never answers);
//   - the term ended by itself (lease lost, renewals stalled): Run
//     campaigns again, and fn may run again with a higher term;
//   - fn returned while still leader: Run resigns and returns fn's error
//     (nil when fn returned nil).
//
// A store failure while campaigning is retried after the retry delay
// (WithRetryDelay); invalid arguments and a closed Client are returned.
func (e *Election) Run(ctx context.Context, fn func(ctx context.Context, term uint64) error) error {
	if ctx == nil || fn == nil {
		return fmt.Errorf("%w: nil context or function", ErrInvalidArgument)
	}
	for {
		l, err := e.Campaign(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return fmt.Errorf("election %q: %w", e.key, ctx.Err())
		case errors.Is(err, dlock.ErrBackend):
			if !sleep(ctx, e.cfg.retryDelay) {
				return fmt.Errorf("election %q: %w", e.key, ctx.Err())
			}
			continue
		default:
			return err
		}
		// The term also ends with ctx, so that fn stops before the
		// resignation below.
		stop := context.AfterFunc(ctx, func() { l.cancel(context.Cause(ctx)) })
		ferr := fn(l.Context(), l.Term())
		stop()
		lost := l.Err() // nil: fn returned while still leading
		// Not with ctx, which may have ended: a Run that returns has
		// released the lock when the store answers. But bounded, so that
		// a store that does not answer cannot hold Run; the release then
		// goes on in the background (as Unlock's does past its ctx).
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
		_ = l.Resign(rctx)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("election %q: %w", e.key, ctx.Err())
		case lost == nil:
			return ferr
		case errors.Is(lost, dlock.ErrClosed):
			return lost
		}
	}
}

// resignTimeout bounds how long Run waits for the release of its lock
// once fn returned.
const resignTimeout = 5 * time.Second

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock"
)

// Leader is who leads, as the store says.
type Leader struct {
	// Term is the leader's fencing token.
	Term uint64
	// Identity is the leader's WithIdentity (its lock's owner meta).
	Identity string
	Host     string
	PID      int
	// Since is when the term began, by the leader's clock.
	Since time.Time
}

// Leader returns the current leader, or ok=false when nobody leads. It is
// one Inspect round trip; the driver must support it (dlock.ErrUnsupported
// otherwise).
func (e *Election) Leader(ctx context.Context) (leader Leader, ok bool, err error) {
	info, ok, err := e.locks.Inspect(ctx, e.key)
	if err != nil || !ok {
		return Leader{}, false, err
	}
	return Leader{Term: info.Token, Identity: info.Owner.Meta, Host: info.Owner.Host, PID: info.Owner.PID, Since: info.Since}, true, nil
}

// Observe reports leadership changes until ctx ends, then closes the
// channel. The first value is the current leader; then one value per
// change of term, and the zero Leader (Term 0) when nobody leads. Changes
// by another process are seen within the poll interval (WithPollInterval);
// this Election's own campaigns and resignations at once.
//
// The channel holds the latest value only: a reader that falls behind
// skips stale values, and nothing ever waits for it. Store errors are
// retried at the next poll; the last value stands meanwhile. A nil ctx is
// ErrInvalidArgument, and no channel. Observe reads the leader once before
// it returns, so that a driver that cannot tell (dlock.ErrUnsupported) is
// an error, not a channel that never delivers.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	// The kick is registered before the first read, so that a campaign of
	// this Election right after that read is not missed until a poll.
	kick := make(chan struct{}, 1)
	e.mu.Lock()
	e.kicks[kick] = struct{}{}
	e.mu.Unlock()
	stopKicks := func() {
		e.mu.Lock()
		delete(e.kicks, kick)
		e.mu.Unlock()
	}
	l, _, err := e.Leader(ctx)
	if errors.Is(err, dlock.ErrUnsupported) {
		stopKicks()
		return nil, err
	}
	out := make(chan Leader, 1)
	if err == nil {
		out <- l
	}
	go func() {
		defer close(out)
		defer stopKicks()
		last, first := l, err != nil // first: nothing delivered yet
		t := time.NewTimer(e.cfg.poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-kick:
				t.Stop()
			}
			if l, _, err := e.Leader(ctx); err == nil && (first || l.Term != last.Term) {
				first, last = false, l
				publish(out, l)
			}
			t.Reset(e.cfg.poll)
		}
	}()
	return out, nil
}

// publish replaces whatever value out holds with l. Only this goroutine
// sends, so after draining there is room.
func publish(out chan Leader, l Leader) {
	select {
	case <-out:
	default:
	}
	out <- l
}

package memdriver

import (
	"context"
	"sync/atomic"
	"time"
)

// Operation names passed to a Fault.
const (
	OpAcquire      = "acquire"
	OpRelease      = "release"
	OpRenew        = "renew"
	OpWatch        = "watch"        // Driver.Watch; its ctx is context.Background()
	OpWatchAdd     = "watch-add"    // Watcher.Add
	OpWatchRemove  = "watch-remove" // Watcher.Remove
	OpInspect      = "inspect"
	OpList         = "list"
	OpForceRelease = "force-release"
)

// Fault is a fault-injection hook. It is called with the ctx of the
// operation and its name (one of the Op constants); a non-nil error fails
// the operation with that error, unwrapped, so a test can match its own
// sentinel with errors.Is. A Fault may block, to simulate a slow store; it
// should return once ctx is done. It may be called from many goroutines at
// once. Capabilities, Close and Watcher.Close are never faulted.
type Fault func(ctx context.Context, op string) error

// SetFault installs f to be called before every operation of d, before the
// store sees it: an error from f means the request never reached the store,
// and nothing changed. If f returns nil but ctx is done by then, the
// operation fails with ctx.Err(), as a store that answered too late would.
// A nil f removes the hook. Argument errors (driver.ErrInvalid) are
// reported before f is called, as a client library rejects them before
// sending anything.
func (d *Driver) SetFault(f Fault) { setFault(&d.fault, f) }

// SetFaultAfter installs f to be called after every operation of d was
// applied to the store: an error from f is returned instead of the result,
// which is lost, as when a store's reply does not reach the client. This is
// how a test makes a retried request meet the effects of its first try. If
// f returns nil but ctx is done by then, the operation fails with
// ctx.Err(). For OpWatch an error means the new Watcher is closed and not
// returned. A nil f removes the hook.
func (d *Driver) SetFaultAfter(f Fault) { setFault(&d.faultAfter, f) }

func setFault(p *atomic.Pointer[Fault], f Fault) {
	if f == nil {
		p.Store(nil)
		return
	}
	p.Store(&f)
}

// before runs the checks that precede every operation: the handle is open,
// ctx is not done, and the fault hook lets it through.
func (d *Driver) before(ctx context.Context, op string) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.s.unusable != nil {
		return d.s.unusable
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if f := d.fault.Load(); f != nil {
		if err := (*f)(ctx, op); err != nil {
			return err
		}
		// A hook that blocked until ctx was done stands for a store that
		// did not answer in time.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// after runs the after-hook of an applied operation.
func (d *Driver) after(ctx context.Context, op string) error {
	f := d.faultAfter.Load()
	if f == nil {
		return nil
	}
	if err := (*f)(ctx, op); err != nil {
		return err
	}
	return ctx.Err()
}

// run performs one operation: before, apply with the store locked and the
// store's time read once (so operations see time in the order they are
// applied), then after.
func run[T any](ctx context.Context, d *Driver, op string, apply func(s *store, now time.Time) (T, error)) (T, error) {
	var zero T
	if err := d.before(ctx, op); err != nil {
		return zero, err
	}
	s := d.s
	s.mu.Lock()
	v, err := apply(s, s.now())
	s.mu.Unlock()
	if err != nil {
		return zero, err
	}
	if err := d.after(ctx, op); err != nil {
		return zero, err
	}
	return v, nil
}

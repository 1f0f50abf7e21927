package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// Operator functions: look at locks and break them, for tools such as the
// dlock CLI. They need a driver that implements driver.Inspector (the
// Redis, etcd and in-memory drivers do); otherwise they return
// ErrUnsupported.

// operate runs f on the driver's Inspector for op on key (checked as a lock
// name when named is set), bounded by ctx like every call, with its error
// classified.
func operate[T any](c *Client, ctx context.Context, op, key string, named bool, f func(context.Context, driver.Inspector) (T, error)) (T, error) {
	var zero T
	if ctx == nil {
		return zero, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	insp, ok := c.drv.(driver.Inspector)
	if !ok {
		return zero, fmt.Errorf("dlock: %s %q: %w", op, key, ErrUnsupported)
	}
	if named {
		if err := c.CheckKey(key); err != nil {
			return zero, err
		}
	}
	v, err := engine.Call(c.e, ctx, func(ctx context.Context) (T, error) { return f(ctx, insp) })
	return v, c.classify(ctx, op, key, err)
}

// found is a lookup's answer with whether there was anything to find.
type found[T any] struct {
	v  T
	ok bool
}

// Inspect returns the holder of key, or ok=false when the lock is free.
func (c *Client) Inspect(ctx context.Context, key string) (info LockInfo, ok bool, err error) {
	r, err := operate(c, ctx, "inspect", key, true, func(ctx context.Context, insp driver.Inspector) (found[LockInfo], error) {
		info, ok, err := insp.Inspect(ctx, key)
		return found[LockInfo]{info, ok}, err
	})
	return r.v, r.ok, err
}

// List returns every held lock whose name starts with prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]LockInfo, error) {
	return operate(c, ctx, "list", prefix, false, func(ctx context.Context, insp driver.Inspector) ([]LockInfo, error) {
		return insp.List(ctx, prefix)
	})
}

// ForceRelease frees key whoever holds it and wakes its waiters: the
// break-glass tool for a lock held by a process that is stuck but alive.
// It returns the broken holder's fencing token, so the protected resource
// can be told to reject it, or ok=false when the lock was free. The holder
// learns at its next renewal that the lock is lost.
func (c *Client) ForceRelease(ctx context.Context, key string) (token uint64, ok bool, err error) {
	r, err := operate(c, ctx, "force release", key, true, func(ctx context.Context, insp driver.Inspector) (found[uint64], error) {
		token, ok, err := insp.ForceRelease(ctx, key)
		return found[uint64]{token, ok}, err
	})
	return r.v, r.ok, err
}

// classify turns a driver error into dlock's: the caller's ctx error,
// an invalid argument, or a backend failure.
func (c *Client) classify(ctx context.Context, op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("dlock: %s %q: %w", op, key, ctx.Err())
	case errors.Is(err, ErrClosed):
		return err
	}
	return engine.WrapBackend(op, key, err)
}

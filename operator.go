package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/engine"
)

// Operator functions: look at locks and break them, for tools such as the
// dlock CLI. They need a driver that implements driver.Inspector (Redis and
// the in-memory driver do); otherwise they return ErrUnsupported.

func (c *Client) inspector(op, key string, ctx context.Context) (driver.Inspector, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	insp, ok := c.drv.(driver.Inspector)
	if !ok {
		return nil, fmt.Errorf("dlock: %s %q: %w", op, key, ErrUnsupported)
	}
	return insp, nil
}

// Inspect returns the holder of key, or ok=false when the lock is free.
func (c *Client) Inspect(ctx context.Context, key string) (info LockInfo, ok bool, err error) {
	insp, err := c.inspector("inspect", key, ctx)
	if err == nil {
		err = c.CheckKey(key)
	}
	if err != nil {
		return LockInfo{}, false, err
	}
	type result struct {
		info LockInfo
		ok   bool
	}
	r, err := engine.Call(c.e, ctx, func(ctx context.Context) (result, error) {
		info, ok, err := insp.Inspect(ctx, key)
		return result{info, ok}, err
	})
	return r.info, r.ok, c.classify(ctx, "inspect", key, err)
}

// List returns every held lock whose name starts with prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]LockInfo, error) {
	insp, err := c.inspector("list", prefix, ctx)
	if err != nil {
		return nil, err
	}
	infos, err := engine.Call(c.e, ctx, func(ctx context.Context) ([]LockInfo, error) {
		return insp.List(ctx, prefix)
	})
	return infos, c.classify(ctx, "list", prefix, err)
}

// ForceRelease frees key whoever holds it and wakes its waiters: the
// break-glass tool for a lock held by a process that is stuck but alive.
// It returns the broken holder's fencing token, so the protected resource
// can be told to reject it, or ok=false when the lock was free. The holder
// learns at its next renewal that the lock is lost.
func (c *Client) ForceRelease(ctx context.Context, key string) (token uint64, ok bool, err error) {
	insp, err := c.inspector("force release", key, ctx)
	if err == nil {
		err = c.CheckKey(key)
	}
	if err != nil {
		return 0, false, err
	}
	type result struct {
		token uint64
		ok    bool
	}
	r, err := engine.Call(c.e, ctx, func(ctx context.Context) (result, error) {
		token, ok, err := insp.ForceRelease(ctx, key)
		return result{token, ok}, err
	})
	return r.token, r.ok, c.classify(ctx, "force release", key, err)
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

package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/memdriver"
)

// A store client's own timeout (the etcd driver's request timeout, say)
// while the caller's ctx is live is a store failure: it matches
// ErrBackend, keeps its text, and does not match context.DeadlineExceeded
// or context.Canceled, which would tell the caller its own ctx ended.
// Before, the etcd driver's 5 s timeout matched DeadlineExceeded.
func TestStoreClientTimeoutIsNoCallerCtxError(t *testing.T) {
	for _, ctxErr := range []error{context.DeadlineExceeded, context.Canceled} {
		d := memdriver.New()
		c, err := dlock.New(d, dlock.WithLogger(leasecheck.QuietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx := leasecheck.Context(t, 10*time.Second)
		held, err := c.TryLock(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		d.SetFault(func(context.Context, string) error { return fmt.Errorf("rpc error: %w", ctxErr) })
		calls := map[string]func() error{
			"TryLock":    func() error { _, err := c.TryLock(ctx, "k"); return err },
			"Lock":       func() error { _, err := c.Lock(ctx, "k"); return err },
			"Lock FIFO":  func() error { _, err := c.Lock(ctx, "k", dlock.WithFIFO()); return err },
			"TryLockAll": func() error { _, err := c.TryLockAll(ctx, []string{"a", "b"}); return err },
			"Inspect":    func() error { _, _, err := c.Inspect(ctx, "k"); return err },
			"Unlock":     func() error { return held.Unlock(ctx) },
		}
		for name, call := range calls {
			err := call()
			if !errors.Is(err, dlock.ErrBackend) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
				!strings.Contains(err.Error(), ctxErr.Error()) {
				t.Errorf("%s with the store client's own %v: %v; want ErrBackend, its text, and no context error", name, ctxErr, err)
			}
		}
		d.SetFault(nil)
	}
}

package dlockprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The lock label takes what the mapping returns, up to the cap; past it,
// every name counts as "other".
func TestLockLabelIsCapped(t *testing.T) {
	prefix := func(key string) string { p, _, _ := strings.Cut(key, ":"); return p }
	col, err := dlockprom.New(dlockprom.WithLockLabel(prefix, 2))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(memdriver.New(), dlock.WithObserver(col))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"orders:1", "orders:2", "reports:9", "users:7", "users:8"} {
		l, err := c.TryLock(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
	}
	_ = c.Close()
	const want = `
# HELP dlock_acquire_total Lock and TryLock calls, by outcome (acquired, busy, canceled, closed, error).
# TYPE dlock_acquire_total counter
dlock_acquire_total{lock="orders",primitive="lock",result="acquired"} 2
dlock_acquire_total{lock="other",primitive="lock",result="acquired"} 2
dlock_acquire_total{lock="reports",primitive="lock",result="acquired"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "dlock_acquire_total"); err != nil {
		t.Error(err)
	}
}

func TestOptionsRefuseBadInput(t *testing.T) {
	for name, opt := range map[string]dlockprom.Option{
		"nil option":   nil,
		"nil mapping":  dlockprom.WithLockLabel(nil, 10),
		"zero cap":     dlockprom.WithLockLabel(func(string) string { return "x" }, 0),
		"negative cap": dlockprom.WithLockLabel(func(string) string { return "x" }, -1),
	} {
		if _, err := dlockprom.New(opt); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func TestConstLabelsOnEveryMetric(t *testing.T) {
	col, err := dlockprom.New(dlockprom.WithConstLabels(map[string]string{"service": "billing"}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(memdriver.New(), dlock.WithObserver(col))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(context.Background())
	_ = c.Close()
	const want = `
# HELP dlock_release_total Unlock calls that did work, by outcome (released, not_held, canceled, closed, error).
# TYPE dlock_release_total counter
dlock_release_total{primitive="lock",result="released",service="billing"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), "dlock_release_total"); err != nil {
		t.Error(err)
	}
}

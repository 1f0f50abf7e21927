package dlockprom_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
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
	want := map[string]float64{
		`dlock_acquire_total{lock="orders",primitive="lock",result="acquired"}`:  2,
		`dlock_acquire_total{lock="other",primitive="lock",result="acquired"}`:   2,
		`dlock_acquire_total{lock="reports",primitive="lock",result="acquired"}`: 1,
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	if got := nonZero(samples(t, reg, "dlock_acquire_total")); !maps.Equal(got, want) {
		t.Errorf("dlock_acquire_total: %v, want %v", got, want)
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
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	want := map[string]float64{`dlock_release_total{primitive="lock",result="released",service="billing"}`: 1}
	if got := nonZero(samples(t, reg, "dlock_release_total")); !maps.Equal(got, want) {
		t.Errorf("dlock_release_total: %v, want %v", got, want)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(col.MetricNames()) {
		t.Errorf("%d families gathered, want %d", len(mfs), len(col.MetricNames()))
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == "service" && l.GetValue() == "billing")
			}
			if !found {
				t.Errorf("%s %v has no service label", mf.GetName(), m.GetLabel())
			}
		}
	}
}

package dlockprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// exprs returns every "expr" string in a decoded Grafana dashboard.
func exprs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "expr" {
				out = append(out, s)
			}
			out = append(out, exprs(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, exprs(x)...)
		}
	}
	return out
}

// exposedSeries runs a session that makes every metric family appear
// (acquire, busy, wait, release, renewal, renewal failure, loss) and returns
// the sample names the registry exposes: histograms as _bucket, _sum,
// _count.
func exposedSeries(t *testing.T) map[string]bool {
	t.Helper()
	col, err := dlockprom.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	store := memdriver.New()
	c, err := dlock.New(store, dlock.WithObserver(col), dlock.WithRenewRetryDelay(5*time.Millisecond),
		dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.TryLock(ctx, "k", dlock.WithTTL(60*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Millisecond)
	if _, err := c.Lock(wctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock: %v", err)
	}
	wcancel()
	// The store fails every renewal from now on: failures, then a loss.
	store.SetFault(func(_ context.Context, op string) error {
		if op == memdriver.OpRenew {
			return errors.New("store down")
		}
		return nil
	})
	<-l.Done()
	_ = l.Unlock(ctx)
	_ = c.Close()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
			continue
		}
		names[mf.GetName()] = true
	}
	return names
}

// The dashboard in docs/ queries only series the collector exposes, and
// shows every metric family the collector has.
func TestDashboardMatchesCollector(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	queries := exprs(dash)
	if len(queries) == 0 {
		t.Fatal("dashboard has no queries")
	}
	exposed := exposedSeries(t)
	metric := regexp.MustCompile(`\bdlock_[a-z_]+`)
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metric.FindAllString(q, -1) {
			if !exposed[name] {
				t.Errorf("dashboard queries %s, which the collector does not expose (query %q)", name, q)
			}
			used[name] = true
		}
	}
	col, _ := dlockprom.New()
	var missing []string
	for _, family := range col.MetricNames() {
		if !used[family] && !used[family+"_bucket"] && !used[family+"_sum"] && !used[family+"_count"] {
			missing = append(missing, family)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("dashboard shows nothing of %v", missing)
	}
	if len(exposed) < 20 {
		t.Errorf("the session exposed only %d series names: %v", len(exposed), exposed)
	}
}

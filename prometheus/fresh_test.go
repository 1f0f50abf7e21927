package dlockprom_test

import (
	"maps"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlockio/dlock"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A documented metric family: a row of the table under "Prometheus metrics"
// in docs/observability.md.
type documented struct {
	typ    string   // counter, gauge, histogram
	labels []string // by name
}

func documentedFamilies(t *testing.T) map[string]documented {
	t.Helper()
	raw, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Prometheus metrics\n")
	if !ok {
		t.Fatal(`docs/observability.md has no section "Prometheus metrics"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `(dlock_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")
	label := regexp.MustCompile("`([a-z_]+)`")
	out := make(map[string]documented)
	for line := range strings.Lines(section) {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d := documented{typ: m[2]}
		for _, l := range label.FindAllStringSubmatch(m[3], -1) {
			d.labels = append(d.labels, l[1])
		}
		slices.Sort(d.labels)
		out[m[1]] = d
	}
	if len(out) == 0 {
		t.Fatal("no metric families found in docs/observability.md")
	}
	return out
}

// A fresh Collector, scraped before any Client used it, exports every
// family that docs/observability.md documents, with the documented type and
// labels, every value at 0; counters and gauges have every label set known
// in advance (so a rate or increase sees their first event), histograms one
// per primitive.
func TestFreshCollectorExportsEveryFamily(t *testing.T) {
	docs := documentedFamilies(t)
	col, err := dlockprom.New()
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(col.MetricNames())); !slices.Equal(got, slices.Sorted(maps.Keys(docs))) {
		t.Errorf("MetricNames %v, documented %v", got, slices.Sorted(maps.Keys(docs)))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := make(map[string][]string) // family -> its series' label values, "a,b"
	for _, mf := range mfs {
		name := mf.GetName()
		d, ok := docs[name]
		if !ok {
			t.Errorf("%s is exported but not documented", name)
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); typ != d.typ {
			t.Errorf("%s: type %s, documented %s", name, typ, d.typ)
		}
		for _, m := range mf.GetMetric() {
			var names, values []string
			for _, l := range m.GetLabel() {
				names, values = append(names, l.GetName()), append(values, l.GetValue())
			}
			if !slices.Equal(names, d.labels) {
				t.Errorf("%s: labels %v, documented %v", name, names, d.labels)
			}
			series[name] = append(series[name], strings.Join(values, ","))
			if v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount()); v != 0 {
				t.Errorf("%s{%v} = %v before any event", name, values, v)
			}
		}
	}
	for name := range docs {
		if len(series[name]) == 0 {
			t.Errorf("%s is documented but not exported before its first event", name)
		}
	}

	// The label sets, by name of their labels' values in label order.
	prims := []string{"lock", "permit", "read"}
	cross := func(a []string, b ...string) []string {
		var out []string
		for _, x := range a {
			for _, y := range b {
				out = append(out, x+","+y)
			}
		}
		return out
	}
	want := map[string][]string{
		"dlock_acquire_total": cross(prims, dlock.ResultAcquired, dlock.ResultBusy, dlock.ResultCanceled,
			dlock.ResultClosed, dlock.ResultError),
		"dlock_acquire_attempts_total": prims,
		"dlock_wait_seconds":           cross(prims, dlock.ResultAcquired),
		"dlock_release_total": cross(prims, dlock.ResultReleased, dlock.ResultNotHeld, dlock.ResultCanceled,
			dlock.ResultClosed, dlock.ResultError),
		"dlock_hold_seconds":         prims,
		"dlock_lease_lost_total":     cross(prims, dlock.LostNotHeld, dlock.LostDeadline, dlock.LostClosed, dlock.LostGroup),
		"dlock_renew_seconds":        {""},
		"dlock_renew_batch_leases":   {""},
		"dlock_renew_failures_total": {""},
		"dlock_leases_held":          prims,
		"dlock_waiters":              prims,
		"dlock_backend_errors_total": {"acquire", "background release", "release", "renew"},
	}
	for name, sets := range want {
		if got, want := slices.Sorted(slices.Values(series[name])), slices.Sorted(slices.Values(sets)); !slices.Equal(got, want) {
			t.Errorf("%s: label sets %q, want %q", name, got, want)
		}
	}

	// As Prometheus scrapes it: every documented family has its TYPE line.
	web := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer web.Close()
	page := scrape(t, web.URL)
	for name, d := range docs {
		if !strings.Contains(page, "# TYPE "+name+" "+d.typ+"\n") {
			t.Errorf("the scrape has no family %s (%s)", name, d.typ)
		}
	}
}

// With a lock label, the series known in advance carry lock="other", and
// take nothing from the cap: the first name mapped gets its own label.
func TestFreshCollectorWithLockLabel(t *testing.T) {
	prefix := func(key string) string { p, _, _ := strings.Cut(key, ":"); return p }
	col, err := dlockprom.New(dlockprom.WithLockLabel(prefix, 1))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	all := samples(t, reg, "dlock_acquire_total", "dlock_lease_lost_total")
	for _, s := range []string{
		`dlock_acquire_total{lock="other",primitive="lock",result="acquired"}`,
		`dlock_acquire_total{lock="other",primitive="permit",result="error"}`,
		`dlock_lease_lost_total{lock="other",primitive="read",reason="not_held"}`,
	} {
		if v, ok := all[s]; !ok || v != 0 {
			t.Errorf("%s = %v (exported: %v), want 0", s, v, ok)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(col.MetricNames()) {
		t.Errorf("%d families exported, want %d", len(mfs), len(col.MetricNames()))
	}

	col.Acquire(dlock.AcquireEvent{Primitive: "lock", Key: "orders:1", Result: dlock.ResultAcquired, Attempts: 1})
	want := map[string]float64{`dlock_acquire_total{lock="orders",primitive="lock",result="acquired"}`: 1}
	if got := nonZero(samples(t, reg, "dlock_acquire_total")); !maps.Equal(got, want) {
		t.Errorf("after one acquisition: %v, want %v", got, want)
	}
}

package dlockotel_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlockio/dlock"
	dlockotel "github.com/dlockio/dlock/otel"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// documentedInstruments returns the instruments of the table under
// "OpenTelemetry" in docs/observability.md, with their kind.
func documentedInstruments(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## OpenTelemetry\n")
	if !ok {
		t.Fatal(`docs/observability.md has no section "OpenTelemetry"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `(dlock\\.[a-z.]+)` \\| ([a-z -]+) \\|")
	out := make(map[string]string)
	for line := range strings.Lines(section) {
		if m := row.FindStringSubmatch(line); m != nil {
			out[m[1]] = m[2]
		}
	}
	if len(out) == 0 {
		t.Fatal("no instruments found in docs/observability.md")
	}
	return out
}

// A fresh Observer's first collection, before any event, has every
// documented counter and up-down counter at 0, under every attribute set
// known in advance. Histograms, which cannot appear without a value, are
// left out until their first event.
func TestFreshObserverExportsEveryCounter(t *testing.T) {
	docs := documentedInstruments(t)
	tm := newTelemetry(t)
	m := tm.metrics(t)
	var prims, ops, lost []string
	for _, p := range []string{"lock", "read", "permit"} {
		prims = append(prims, string(dlockotel.AttrPrimitive)+"="+p)
		for _, r := range []string{dlock.LostNotHeld, dlock.LostDeadline, dlock.LostClosed, dlock.LostGroup} {
			lost = append(lost, string(dlockotel.AttrLostReason)+"="+r+","+string(dlockotel.AttrPrimitive)+"="+p)
		}
	}
	for _, op := range []string{"acquire", "release", "renew", "background release"} {
		ops = append(ops, string(dlockotel.AttrOperation)+"="+op)
	}
	want := map[string][]string{ // key=value, by key, joined by ","
		"dlock.acquire.attempts": prims,
		"dlock.leases.held":      prims,
		"dlock.waiters":          prims,
		"dlock.lease.lost":       lost,
		"dlock.renew.failures":   {""},
		"dlock.backend.errors":   ops,
	}
	for name, kind := range docs {
		if kind == "histogram" {
			if _, ok := m[name]; ok {
				t.Errorf("%s exported before any value was recorded", name)
			}
			continue
		}
		if _, ok := want[name]; !ok {
			t.Errorf("documented %s %s: not known to this test", kind, name)
			continue
		}
		sum, ok := m[name].(metricdata.Sum[int64])
		if !ok {
			t.Errorf("%s (%s) not exported before its first event: %T", name, kind, m[name])
			continue
		}
		if sum.IsMonotonic != (kind == "counter") {
			t.Errorf("%s: monotonic %v, documented as %s", name, sum.IsMonotonic, kind)
		}
		var sets []string
		for _, dp := range sum.DataPoints {
			var vals []string
			for _, kv := range dp.Attributes.ToSlice() {
				vals = append(vals, string(kv.Key)+"="+kv.Value.AsString())
			}
			sets = append(sets, strings.Join(vals, ","))
			if dp.Value != 0 {
				t.Errorf("%s{%v} = %d before any event", name, vals, dp.Value)
			}
		}
		slices.Sort(sets)
		w := slices.Sorted(slices.Values(want[name]))
		if !slices.Equal(sets, w) {
			t.Errorf("%s: attribute sets %q, want %q", name, sets, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("%s is not documented in docs/observability.md", name)
	}
}

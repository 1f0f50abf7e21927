package dlockprom_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func httptestGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// samples returns the counter and gauge samples of the named families in
// g, keyed as the text format writes them: name{label="value",...}, labels
// by name.
func samples(t *testing.T, g prometheus.Gatherer, names ...string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		if !contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var b strings.Builder
			b.WriteString(mf.GetName())
			for i, l := range m.GetLabel() {
				if i == 0 {
					b.WriteByte('{')
				} else {
					b.WriteByte(',')
				}
				b.WriteString(l.GetName() + "=" + strconv.Quote(l.GetValue()))
			}
			if len(m.GetLabel()) > 0 {
				b.WriteByte('}')
			}
			v := m.GetCounter().GetValue()
			if m.Gauge != nil {
				v = m.GetGauge().GetValue()
			}
			out[b.String()] = v
		}
	}
	return out
}

// scraped returns the samples of the named families in a scraped page, in
// the same form as samples.
func scraped(t *testing.T, page string, names ...string) map[string]float64 {
	t.Helper()
	out := make(map[string]float64)
	for line := range strings.Lines(page) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		name, _, _ := strings.Cut(series, "{")
		if !ok || !contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("scraped line %q: %v", line, err)
		}
		out[series] = v
	}
	return out
}

// nonZero returns the samples whose value is not 0.
func nonZero(s map[string]float64) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range s {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

package dlockprom_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	dlockprom "github.com/dlockio/dlock/prometheus"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newClient(t *testing.T, addr string, col *dlockprom.Collector) *dlock.Client {
	t.Helper()
	drv, err := redisdriver.New(redisserver.NewClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(drv, dlock.WithObserver(col), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		dlock.WithRenewRetryDelay(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// gauge reads a gauge with the label primitive="lock" from g.
func gauge(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// awaitGauge waits until the gauge reads want (events arrive through the
// Client's observer queue, a moment after the call returned).
func awaitGauge(t *testing.T, g prometheus.Gatherer, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for gauge(t, g, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", name, gauge(t, g, name), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Against a real redis-server: acquire, contend, wait, a lock broken behind
// its holder, a store that stops answering; the collector, read directly
// and scraped over HTTP, counts each.
func TestCollectorOnRedis(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	col, err := dlockprom.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	c1, c2 := newClient(t, srv.Addr(), col), newClient(t, srv.Addr(), col)
	c3 := newClient(t, proxy.Addr(), col)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	l1, err := c1.TryLock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.TryLock(ctx, "job"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	awaitGauge(t, reg, "dlock_leases_held", 1)
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := c2.Lock(ctx, "job", dlock.WithTTL(900*time.Millisecond))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	awaitGauge(t, reg, "dlock_waiters", 1)
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	awaitGauge(t, reg, "dlock_waiters", 0)
	// Broken behind its holder: c2's next renewal finds it gone.
	if _, ok, err := c1.ForceRelease(ctx, "job"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	<-l2.Done()
	if err := l2.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatal(err)
	}
	// The store stops answering c3: renewals fail, the lease ends at its deadline.
	l3, err := c3.TryLock(ctx, "cron", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	awaitGauge(t, reg, "dlock_leases_held", 1)
	proxy.Blackhole(true)
	<-l3.Done()
	if !errors.Is(l3.Err(), dlock.ErrLockLost) {
		t.Fatal(l3.Err())
	}
	awaitGauge(t, reg, "dlock_leases_held", 0)
	proxy.Blackhole(false)
	for _, c := range []*dlock.Client{c1, c2, c3} {
		_ = c.Close() // delivers every queued event
	}

	// Every label set known in advance is exported from New on, at 0 until
	// its first event (TestFreshCollectorExportsEveryFamily): the session's
	// events show as the series that are not 0.
	names := []string{"dlock_acquire_total", "dlock_release_total", "dlock_lease_lost_total", "dlock_leases_held", "dlock_waiters"}
	want := map[string]float64{
		`dlock_acquire_total{primitive="lock",result="acquired"}`:    3,
		`dlock_acquire_total{primitive="lock",result="busy"}`:        1,
		`dlock_release_total{primitive="lock",result="not_held"}`:    1,
		`dlock_release_total{primitive="lock",result="released"}`:    1,
		`dlock_lease_lost_total{primitive="lock",reason="deadline"}`: 1,
		`dlock_lease_lost_total{primitive="lock",reason="not_held"}`: 1,
	}
	all := samples(t, reg, names...)
	if !maps.Equal(nonZero(all), want) {
		t.Errorf("samples not at 0: %v, want %v", nonZero(all), want)
	}
	for _, gauge := range []string{`dlock_leases_held{primitive="lock"}`, `dlock_waiters{primitive="lock"}`} {
		if v, ok := all[gauge]; !ok || v != 0 {
			t.Errorf("%s = %v (exported: %v), want 0", gauge, v, ok)
		}
	}
	// The same through an HTTP scrape, as Prometheus reads it.
	web := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer web.Close()
	body := scrape(t, web.URL)
	if page := scraped(t, body, names...); !maps.Equal(page, all) {
		t.Errorf("scraped %v, want what the registry gathers: %v", page, all)
	}
	// Histograms and failure counters: one hold per lease (2 released or
	// lost ones of c1 and c2, and c3's), one wait per call.
	// The waits: of calls that acquired, one series per primitive from
	// New on; of the busy TryLock, one more.
	if n := testutil.CollectAndCount(col, "dlock_wait_seconds"); n != 4 {
		t.Errorf("wait series: %d, want 4 (acquired: lock, read, permit; busy: lock)", n)
	}
	for _, line := range []string{
		`dlock_hold_seconds_count{primitive="lock"} 3`,
		`dlock_wait_seconds_count{primitive="lock",result="acquired"} 3`,
		`dlock_acquire_attempts_total{primitive="lock"} `,
		`dlock_renew_seconds_count `,
		`dlock_renew_batch_leases_count `,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("scrape has no line %q", line)
		}
	}
	if v := counterValue(t, reg, "dlock_renew_failures_total"); v < 1 {
		t.Errorf("renew failures %v, want at least 1 (the blackholed store)", v)
	}
	if v := counterValue(t, reg, "dlock_backend_errors_total"); v < 1 {
		t.Errorf("backend errors %v", v)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := httptestGet(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// counterValue sums a counter family over its label sets.
func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

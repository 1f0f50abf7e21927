package dlockotel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	dlockotel "github.com/dlockio/dlock/otel"
	"github.com/dlockio/dlock/redisdriver"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	obs    *dlockotel.Observer
}

func newTelemetry(t *testing.T) telemetry {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	obs, err := dlockotel.New(dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	return telemetry{spans, reader, obs}
}

func newClient(t *testing.T, addr string, obs dlock.Observer) *dlock.Client {
	t.Helper()
	drv, err := redisdriver.New(redisserver.NewClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	c, err := dlock.New(drv, dlock.WithObserver(obs), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// metrics collects the meter provider's data, by instrument name.
func (tm telemetry) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]metricdata.Aggregation)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// byPrimitive returns a sum's values by their dlock.primitive.
func byPrimitive(sum metricdata.Sum[int64]) map[string]int64 {
	out := make(map[string]int64)
	for _, dp := range sum.DataPoints {
		v, _ := dp.Attributes.Value(dlockotel.AttrPrimitive)
		out[v.AsString()] += dp.Value
	}
	return out
}

func attr(attrs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range attrs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// On a real redis-server: a Lock that waits for a holder, a busy TryLock,
// and the Unlocks, seen as spans under the caller's span and as metrics.
func TestSpansAndMetricsOnRedis(t *testing.T) {
	srv := redisserver.Start(t)
	tm := newTelemetry(t)
	holder, waiter := newClient(t, srv.Addr(), tm.obs), newClient(t, srv.Addr(), tm.obs)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l1, err := holder.TryLock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.TryLock(ctx, "report"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	// The waiter's Lock runs under a span of the caller's.
	parentTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tm.spans))
	pctx, parent := parentTP.Tracer("app").Start(ctx, "handle-request")
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := waiter.Lock(pctx, "report")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	deadline := time.Now().Add(5 * time.Second)
	for waiter.Stats().Waiters != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never waited")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a visible wait, for the duration check below
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	if err := l2.Unlock(pctx); err != nil {
		t.Fatal(err)
	}
	parent.End()
	_ = holder.Close() // delivers the queued events
	_ = waiter.Close()

	var acquires, releases []sdktrace.ReadOnlySpan
	for _, s := range tm.spans.Ended() {
		switch s.Name() {
		case "dlock.acquire":
			acquires = append(acquires, s)
		case "dlock.release":
			releases = append(releases, s)
		}
	}
	if len(acquires) != 3 || len(releases) != 2 {
		t.Fatalf("%d acquire spans, %d release spans; want 3 and 2", len(acquires), len(releases))
	}
	var waited sdktrace.ReadOnlySpan
	for _, s := range acquires {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			waited = s
		}
	}
	if waited == nil {
		t.Fatal("no acquire span under the caller's span")
	}
	// Lock queues in the store by default on Redis: the first wait of a
	// Client sends its request twice, before and after it subscribes to
	// its grant announcements.
	if v, _ := attr(waited.Attributes(), dlockotel.AttrAttempts); v.AsInt64() < 2 {
		t.Errorf("waited Lock: attempts %v, want at least 2", v.AsInt64())
	}
	if v, _ := attr(waited.Attributes(), dlockotel.AttrWaitDuration); v.AsFloat64() < 0.02 {
		t.Errorf("waited Lock: wait %vs, want at least the 20 ms it waited", v.AsFloat64())
	}
	if d := waited.EndTime().Sub(waited.StartTime()); d < 20*time.Millisecond {
		t.Errorf("waited Lock span lasted %v", d)
	}
	if v, _ := attr(waited.Attributes(), dlockotel.AttrToken); uint64(v.AsInt64()) != l2.Token() {
		t.Errorf("token attribute %v, want %d", v.AsInt64(), l2.Token())
	}
	results := map[string]int{}
	for _, s := range acquires {
		v, _ := attr(s.Attributes(), dlockotel.AttrResult)
		results[v.AsString()]++
		if n, _ := attr(s.Attributes(), dlockotel.AttrLockName); n.AsString() != "report" {
			t.Errorf("lock name %q", n.AsString())
		}
	}
	if results[dlock.ResultAcquired] != 2 || results[dlock.ResultBusy] != 1 {
		t.Errorf("acquire span results %v", results)
	}

	m := tm.metrics(t)
	hist, ok := m["dlock.acquire.duration"].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("dlock.acquire.duration: %T", m["dlock.acquire.duration"])
	}
	counts := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		v, _ := dp.Attributes.Value(dlockotel.AttrResult)
		counts[v.AsString()] += dp.Count
	}
	if counts[dlock.ResultAcquired] != 2 || counts[dlock.ResultBusy] != 1 {
		t.Errorf("dlock.acquire.duration counts %v", counts)
	}
	// The counters have every primitive from New on (TestFreshObserver):
	// this session's are the lock's.
	held := m["dlock.leases.held"].(metricdata.Sum[int64])
	if v, ok := byPrimitive(held)["lock"]; !ok || v != 0 || held.IsMonotonic {
		t.Errorf("dlock.leases.held %+v", held)
	}
	lease := m["dlock.lease.duration"].(metricdata.Histogram[float64])
	if len(lease.DataPoints) != 1 || lease.DataPoints[0].Count != 2 {
		t.Errorf("dlock.lease.duration %+v", lease)
	}
	if w, ok := byPrimitive(m["dlock.waiters"].(metricdata.Sum[int64]))["lock"]; !ok || w != 0 {
		t.Errorf("dlock.waiters %+v", m["dlock.waiters"])
	}
	if a := byPrimitive(m["dlock.acquire.attempts"].(metricdata.Sum[int64])); a["lock"] < 4 || a["read"] != 0 || a["permit"] != 0 {
		t.Errorf("dlock.acquire.attempts %v", a)
	}
}

// A lock lost behind its holder and a store failure become the lost and
// backend-error metrics, and a failed Unlock an error span.
func TestLossAndFailuresOnRedis(t *testing.T) {
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr())
	tm := newTelemetry(t)
	c := newClient(t, proxy.Addr(), tm.obs)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.TryLock(ctx, "cron", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(true)
	<-l.Done()
	uctx, ucancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ucancel()
	_ = l.Unlock(uctx) // lost already: answered without the store, ErrNotHeld
	if _, err := c.TryLock(uctx, "other"); err == nil {
		t.Fatal("TryLock through a blackholed store succeeded")
	}
	proxy.Blackhole(false)
	proxy.CloseAll() // requests swallowed by the blackhole fail now, not at their timeouts
	_ = c.Close()

	m := tm.metrics(t)
	lost := m["dlock.lease.lost"].(metricdata.Sum[int64])
	reasons := map[string]int64{}
	for _, dp := range lost.DataPoints {
		v, _ := dp.Attributes.Value(dlockotel.AttrLostReason)
		reasons[v.AsString()] += dp.Value
	}
	if reasons[dlock.LostDeadline] != 1 || reasons[dlock.LostNotHeld]+reasons[dlock.LostClosed]+reasons[dlock.LostGroup] != 0 {
		t.Errorf("lost reasons %v, want one deadline", reasons)
	}
	if f := m["dlock.renew.failures"].(metricdata.Sum[int64]); len(f.DataPoints) != 1 || f.DataPoints[0].Value < 1 {
		t.Errorf("renew failures %+v", f)
	}
	ops := map[string]int64{}
	if b, ok := m["dlock.backend.errors"].(metricdata.Sum[int64]); ok {
		for _, dp := range b.DataPoints {
			v, _ := dp.Attributes.Value(dlockotel.AttrOperation)
			ops[v.AsString()] += dp.Value
		}
	}
	if ops["renew"] < 1 {
		t.Errorf("backend errors by operation %v, want renew failures", ops)
	}
}

func TestOptionsRefuseBadInput(t *testing.T) {
	for name, opt := range map[string]dlockotel.Option{
		"nil option":          nil,
		"nil tracer provider": dlockotel.WithTracerProvider(nil),
		"nil meter provider":  dlockotel.WithMeterProvider(nil),
	} {
		if _, err := dlockotel.New(opt); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

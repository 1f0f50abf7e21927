package dlockotel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/dlockio/dlock/otel"

// Attribute keys.
const (
	AttrPrimitive    = attribute.Key("dlock.primitive")
	AttrLockName     = attribute.Key("dlock.lock.name")
	AttrResult       = attribute.Key("dlock.result")
	AttrAttempts     = attribute.Key("dlock.attempts")
	AttrWaitDuration = attribute.Key("dlock.wait.duration")
	AttrHoldDuration = attribute.Key("dlock.hold.duration")
	AttrToken        = attribute.Key("dlock.token")
	AttrLostReason   = attribute.Key("dlock.lost.reason")
	AttrOperation    = attribute.Key("dlock.operation")
)

// Option configures an Observer.
type Option func(*config) error

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets where spans go. Default: otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil TracerProvider", dlock.ErrInvalidArgument)
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets where metrics go. Default: otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", dlock.ErrInvalidArgument)
		}
		c.mp = mp
		return nil
	}
}

// Observer implements dlock.Observer with OpenTelemetry spans and metrics.
// It is safe for concurrent use; one Observer may serve many Clients.
type Observer struct {
	dlock.BaseObserver // future Observer methods do nothing until this package knows them

	tracer trace.Tracer

	acquireDur    metric.Float64Histogram
	attempts      metric.Int64Counter
	releaseDur    metric.Float64Histogram
	leaseDur      metric.Float64Histogram
	lost          metric.Int64Counter
	held          metric.Int64UpDownCounter
	waiters       metric.Int64UpDownCounter
	renewDur      metric.Float64Histogram
	renewBatch    metric.Int64Histogram
	renewFailures metric.Int64Counter
	backend       metric.Int64Counter

	mu    sync.Mutex
	attrs map[attrKey]metric.MeasurementOption // attribute sets, built once per label pair
}

type attrKey struct{ k1, v1, k2, v2 string }

// Bucket boundaries in seconds, as in the Prometheus package.
var (
	durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	leaseBuckets    = []float64{0.001, 0.01, 0.1, 1, 10, 60, 300, 900, 3600}
	batchBuckets    = []float64{1, 4, 16, 64, 256, 1024}
)

// New returns an Observer; install it with dlock.WithObserver.
func New(opts ...Option) (*Observer, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", dlock.ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	o := &Observer{tracer: cfg.tp.Tracer(ScopeName), attrs: make(map[attrKey]metric.MeasurementOption)}
	m := cfg.mp.Meter(ScopeName)
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	var err error
	o.acquireDur, err = m.Float64Histogram("dlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Lock and TryLock calls, waiting included."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	check(err)
	o.attempts, err = m.Int64Counter("dlock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Acquisition requests sent to the store."))
	check(err)
	o.releaseDur, err = m.Float64Histogram("dlock.release.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Unlock calls that did work."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	check(err)
	o.leaseDur, err = m.Float64Histogram("dlock.lease.duration", metric.WithUnit("s"),
		metric.WithDescription("How long leases were held, until Unlock, loss or Close."), metric.WithExplicitBucketBoundaries(leaseBuckets...))
	check(err)
	o.lost, err = m.Int64Counter("dlock.lease.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended without Unlock."))
	check(err)
	o.held, err = m.Int64UpDownCounter("dlock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now."))
	check(err)
	o.waiters, err = m.Int64UpDownCounter("dlock.waiters", metric.WithUnit("{waiter}"),
		metric.WithDescription("Lock calls waiting for a busy lock now."))
	check(err)
	o.renewDur, err = m.Float64Histogram("dlock.renew.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of renewal batches."), metric.WithExplicitBucketBoundaries(durationBuckets...))
	check(err)
	o.renewBatch, err = m.Int64Histogram("dlock.renew.batch.size", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases per renewal batch."), metric.WithExplicitBucketBoundaries(batchBuckets...))
	check(err)
	o.renewFailures, err = m.Int64Counter("dlock.renew.failures", metric.WithUnit("{batch}"),
		metric.WithDescription("Renewal batches that failed with a store error."))
	check(err)
	o.backend, err = m.Int64Counter("dlock.backend.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Store failures, by operation."))
	check(err)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	o.initCounters()
	return o, nil
}

// The attribute values events carry, known in advance.
var (
	primitives  = []string{"lock", "read", "permit"} // the lease kinds: Lock and RWMutex.Lock, RLock, Acquire
	lostReasons = []string{dlock.LostNotHeld, dlock.LostDeadline, dlock.LostClosed, dlock.LostGroup}
	backendOps  = []string{"acquire", "release", "renew", "background release"}
)

// initCounters adds 0 to every counter and up-down counter under each
// attribute set known in advance, so that they are exported from the
// first collection on, at 0, rather than from their first event. A
// histogram cannot be made to appear without recording a value, so each
// appears with its first event.
func (o *Observer) initCounters() {
	ctx := context.Background()
	for _, p := range primitives {
		ps := o.set(AttrPrimitive, p, "", "")
		o.attempts.Add(ctx, 0, ps)
		o.held.Add(ctx, 0, ps)
		o.waiters.Add(ctx, 0, ps)
		for _, r := range lostReasons {
			o.lost.Add(ctx, 0, o.set(AttrPrimitive, p, AttrLostReason, r))
		}
	}
	o.renewFailures.Add(ctx, 0)
	for _, op := range backendOps {
		o.backend.Add(ctx, 0, o.set(AttrOperation, op, "", ""))
	}
}

// set returns the measurement option for the attribute pair k1=v1, k2=v2
// (k2 empty for one attribute), built once.
func (o *Observer) set(k1 attribute.Key, v1 string, k2 attribute.Key, v2 string) metric.MeasurementOption {
	id := attrKey{string(k1), v1, string(k2), v2}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.attrs[id]; ok {
		return s
	}
	kvs := []attribute.KeyValue{k1.String(v1)}
	if k2 != "" {
		kvs = append(kvs, k2.String(v2))
	}
	s := metric.WithAttributeSet(attribute.NewSet(kvs...))
	o.attrs[id] = s
	return s
}

func parent(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// Acquire implements dlock.Observer.
func (o *Observer) Acquire(ev dlock.AcquireEvent) {
	_, span := o.tracer.Start(parent(ev.Ctx), "dlock.acquire", trace.WithTimestamp(ev.Start), trace.WithSpanKind(trace.SpanKindClient))
	span.SetAttributes(AttrPrimitive.String(ev.Primitive), AttrLockName.String(ev.Key), AttrResult.String(ev.Result),
		AttrAttempts.Int(ev.Attempts), AttrWaitDuration.Float64(ev.Wait.Seconds()))
	if ev.Result == dlock.ResultAcquired {
		span.SetAttributes(AttrToken.Int64(int64(ev.Token)))
	}
	endSpan(span, ev.Result, ev.Err, ev.Start.Add(ev.Wait))

	ctx := context.Background()
	o.acquireDur.Record(ctx, ev.Wait.Seconds(), o.set(AttrPrimitive, ev.Primitive, AttrResult, ev.Result))
	p := o.set(AttrPrimitive, ev.Primitive, "", "")
	o.attempts.Add(ctx, int64(ev.Attempts), p)
	if ev.Result == dlock.ResultAcquired {
		o.held.Add(ctx, 1, p)
	}
}

// Release implements dlock.Observer.
func (o *Observer) Release(ev dlock.ReleaseEvent) {
	_, span := o.tracer.Start(parent(ev.Ctx), "dlock.release", trace.WithTimestamp(ev.Start), trace.WithSpanKind(trace.SpanKindClient))
	span.SetAttributes(AttrPrimitive.String(ev.Primitive), AttrLockName.String(ev.Key), AttrResult.String(ev.Result),
		AttrHoldDuration.Float64(ev.Held.Seconds()))
	endSpan(span, ev.Result, ev.Err, ev.Start.Add(ev.Latency))

	ctx := context.Background()
	o.releaseDur.Record(ctx, ev.Latency.Seconds(), o.set(AttrPrimitive, ev.Primitive, AttrResult, ev.Result))
	if ev.WasHeld {
		o.ended(ev.Primitive, ev.Held)
	}
}

// endSpan sets the status (an error only for store failures: busy,
// cancelled and not-held are outcomes the caller handles) and ends span.
func endSpan(span trace.Span, result string, err error, end time.Time) {
	if result == dlock.ResultError && err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(end))
}

// Lost implements dlock.Observer.
func (o *Observer) Lost(ev dlock.LostEvent) {
	o.lost.Add(context.Background(), 1, o.set(AttrPrimitive, ev.Primitive, AttrLostReason, ev.Reason))
	o.ended(ev.Primitive, ev.Held)
}

// ended records the end of a lease: once per lease, by Unlock or loss.
func (o *Observer) ended(primitive string, held time.Duration) {
	p := o.set(AttrPrimitive, primitive, "", "")
	o.leaseDur.Record(context.Background(), held.Seconds(), p)
	o.held.Add(context.Background(), -1, p)
}

// Renew implements dlock.Observer.
func (o *Observer) Renew(ev dlock.RenewEvent) {
	ctx := context.Background()
	o.renewDur.Record(ctx, ev.Latency.Seconds())
	o.renewBatch.Record(ctx, int64(ev.Leases))
	if ev.Err != nil {
		o.renewFailures.Add(ctx, 1)
	}
}

// Wait implements dlock.Observer.
func (o *Observer) Wait(ev dlock.WaitEvent) {
	d := int64(-1)
	if ev.Started {
		d = 1
	}
	o.waiters.Add(context.Background(), d, o.set(AttrPrimitive, ev.Primitive, "", ""))
}

// BackendError implements dlock.Observer.
func (o *Observer) BackendError(ev dlock.BackendErrorEvent) {
	o.backend.Add(context.Background(), 1, o.set(AttrOperation, ev.Op, "", ""))
}

var _ dlock.Observer = (*Observer)(nil)

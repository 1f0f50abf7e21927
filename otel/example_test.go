package dlockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
	dlockotel "github.com/dlockio/dlock/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Install the Observer on a Client: each Lock and Unlock becomes a span
// under the caller's span (here recorded in memory; in production the
// global providers, or the ones passed with WithTracerProvider and
// WithMeterProvider, export them).
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	obs, err := dlockotel.New(dlockotel.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.New(memdriver.New(), dlock.WithObserver(obs)) // redisdriver.Open(url, ...) in production
	if err != nil {
		log.Fatal(err)
	}
	ctx, span := tp.Tracer("app").Start(context.Background(), "nightly-report")
	lease, err := locker.Lock(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	_ = lease.Unlock(ctx)
	span.End()
	_ = locker.Close() // delivers the events still queued

	// The Client's spans are recorded from its observer queue, so they may
	// end after the caller's span.
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), "child of nightly-report:", s.Parent().SpanID() == span.SpanContext().SpanID())
	}
	// Unordered output:
	// dlock.acquire child of nightly-report: true
	// dlock.release child of nightly-report: true
	// nightly-report child of nightly-report: false
}

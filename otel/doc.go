// Package dlockotel reports a dlock Client's events through OpenTelemetry:
// a span per Lock/TryLock call and per Unlock, and the metrics of the
// Prometheus package under OpenTelemetry names.
//
//	obs, err := dlockotel.New() // the global TracerProvider and MeterProvider, or pass your own
//	locker, err := redisdriver.Open(url, dlock.WithObserver(obs))
//
// Spans ("dlock.acquire", "dlock.release") are children of the span in the
// context passed to Lock or Unlock. They are recorded after the call, from
// its event, with the call's own start and end times: the Client's
// observer queue keeps tracing off the lock's path. Attributes:
// dlock.primitive, dlock.lock.name, dlock.result, dlock.attempts,
// dlock.wait.duration (seconds), dlock.token, dlock.hold.duration.
//
// Metrics (units in brackets):
//
//	dlock.acquire.duration   histogram [s]        dlock.primitive, dlock.result
//	dlock.acquire.attempts   counter   {attempt}  dlock.primitive
//	dlock.release.duration   histogram [s]        dlock.primitive, dlock.result
//	dlock.lease.duration     histogram [s]        dlock.primitive
//	dlock.lease.lost         counter   {lease}    dlock.primitive, dlock.lost.reason
//	dlock.leases.held        updown    {lease}    dlock.primitive
//	dlock.waiters            updown    {waiter}   dlock.primitive
//	dlock.renew.duration     histogram [s]
//	dlock.renew.batch.size   histogram {lease}
//	dlock.renew.failures     counter   {batch}
//	dlock.backend.errors     counter   {error}    dlock.operation
//
// The counters and up-down counters are exported from the first collection
// on, at 0 under every attribute set known in advance (dlock.primitive lock,
// read or permit; each dlock.lost.reason and dlock.operation), as long as
// the MeterProvider is in place when New is called: a dashboard shows 0
// rather than no data. A histogram cannot be exported without a recorded
// value, so the histograms (and with them the counts of calls by result)
// appear with their first event.
//
// Lock names appear on spans, never on metrics.
//
// This package lives in a module of its own, so that dlock itself never
// depends on OpenTelemetry.
package dlockotel

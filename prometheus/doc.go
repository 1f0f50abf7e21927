// Package dlockprom exports a dlock Client's events as Prometheus metrics.
//
// A Collector is both a dlock.Observer (install it with dlock.WithObserver)
// and a prometheus.Collector (register it with a prometheus.Registerer).
// One Collector may observe many Clients; their events add up.
//
//	metrics, err := dlockprom.New()
//	prometheus.MustRegister(metrics)
//	locker, err := redisdriver.Open(url, dlock.WithObserver(metrics))
//
// Metrics (every name starts with dlock_; see the repository's
// docs/observability.md for what each means and which alerts to set):
//
//	dlock_acquire_total{primitive,result}          counter
//	dlock_acquire_attempts_total{primitive}        counter
//	dlock_wait_seconds{primitive,result}           histogram
//	dlock_release_total{primitive,result}          counter
//	dlock_hold_seconds{primitive}                  histogram
//	dlock_lease_lost_total{primitive,reason}       counter
//	dlock_renew_seconds                            histogram
//	dlock_renew_batch_leases                       histogram
//	dlock_renew_failures_total                     counter
//	dlock_leases_held{primitive}                   gauge
//	dlock_waiters{primitive}                       gauge
//	dlock_backend_errors_total{op}                 counter
//
// Every family is exported from New on, at 0 before its first event, so
// that dashboards show 0 rather than no data, and a rate or increase counts
// a series' first event. Counters and gauges have every label set known in
// advance from the start (primitive lock, read or permit; each result,
// reason and op); histograms one per primitive (dlock_wait_seconds: of
// calls that acquired), their other label sets appearing with their first
// event. With WithLockLabel, these series have lock="other".
//
// Lock names are not labels: a label per name would create series without
// bound. WithLockLabel adds a "lock" label to the per-lock metrics from a
// function that maps names to a small set (a prefix, a class of job), and
// caps the set it may produce.
//
// This package lives in a module of its own, so that dlock itself never
// depends on the Prometheus client.
package dlockprom

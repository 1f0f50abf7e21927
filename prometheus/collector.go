package dlockprom

import (
	"fmt"
	"sync"

	"github.com/dlockio/dlock"
	"github.com/prometheus/client_golang/prometheus"
)

// Bucket boundaries, in seconds. Waits range from a loopback round trip
// (well under a millisecond) to a job queued behind a long holder; holds
// from a short critical section to a nightly job; renewals are one round
// trip, where anything past a second means trouble.
var (
	WaitBuckets  = prometheus.ExponentialBuckets(0.0005, 2, 18) // 0.5 ms … 65 s
	HoldBuckets  = prometheus.ExponentialBuckets(0.001, 4, 12)  // 1 ms … 70 min
	RenewBuckets = prometheus.ExponentialBuckets(0.0005, 2, 14) // 0.5 ms … 4 s
	BatchBuckets = prometheus.ExponentialBuckets(1, 4, 6)       // 1 … 1024 leases
)

// OtherLock is the "lock" label value of every name past the cap of
// WithLockLabel, and of names the mapping returns "" for.
const OtherLock = "other"

// Option configures a Collector.
type Option func(*config) error

type config struct {
	constLabs prometheus.Labels
	lockLabel func(key string) string
	maxLocks  int
}

// WithLockLabel adds a "lock" label to dlock_acquire_total,
// dlock_wait_seconds, dlock_hold_seconds and dlock_lease_lost_total, whose
// value is label(key). label should map lock names to a small fixed set
// ("reports", "orders"); whatever it returns, at most max distinct values
// become labels and the rest are counted as OtherLock, so a mapping that
// leaks names costs a bounded number of series.
func WithLockLabel(label func(key string) string, max int) Option {
	return func(c *config) error {
		if label == nil || max <= 0 {
			return fmt.Errorf("%w: lock label needs a function and a positive cap (got %d)", dlock.ErrInvalidArgument, max)
		}
		c.lockLabel, c.maxLocks = label, max
		return nil
	}
}

// WithConstLabels adds labels with fixed values to every metric (an
// instance or service name, say).
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) error { c.constLabs = l; return nil }
}

// Collector turns dlock events into Prometheus metrics. It implements
// dlock.Observer and prometheus.Collector and is safe for concurrent use.
type Collector struct {
	dlock.BaseObserver // future Observer methods do nothing until this package knows them

	cfg config

	acquire       *prometheus.CounterVec
	attempts      *prometheus.CounterVec
	wait          *prometheus.HistogramVec
	release       *prometheus.CounterVec
	hold          *prometheus.HistogramVec
	lost          *prometheus.CounterVec
	renew         prometheus.Observer
	renewBatch    prometheus.Observer
	renewFailures prometheus.Counter
	held          *prometheus.GaugeVec
	waiters       *prometheus.GaugeVec
	backend       *prometheus.CounterVec

	all   []prometheus.Collector
	names []string

	fast  fastSeries
	mu    sync.Mutex
	cache map[seriesKey]*series // resolved series, so events do not allocate label slices
	locks map[string]struct{}
}

type seriesKey struct {
	metric       uint8
	a, b, lockID string
}

// New returns a Collector. Register it, and install it on Clients with
// dlock.WithObserver.
func New(opts ...Option) (*Collector, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", dlock.ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	c := &Collector{cfg: cfg, cache: make(map[seriesKey]*series), locks: make(map[string]struct{})}
	lock := func(labels ...string) []string {
		if cfg.lockLabel != nil {
			labels = append(labels, "lock")
		}
		return labels
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: cfg.constLabs}, labels)
		c.all, c.names = append(c.all, v), append(c.names, name)
		return v
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: cfg.constLabs}, labels)
		c.all, c.names = append(c.all, v), append(c.names, name)
		return v
	}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cfg.constLabs}, labels)
		c.all, c.names = append(c.all, v), append(c.names, name)
		return v
	}
	c.acquire = counter("dlock_acquire_total", "Lock and TryLock calls, by outcome (acquired, busy, canceled, closed, error).", lock("primitive", "result")...)
	c.attempts = counter("dlock_acquire_attempts_total", "Acquisition requests sent to the store.", "primitive")
	c.wait = histogram("dlock_wait_seconds", "How long Lock and TryLock calls took, waiting included, by outcome.", WaitBuckets, lock("primitive", "result")...)
	c.release = counter("dlock_release_total", "Unlock calls that did work, by outcome (released, not_held, canceled, closed, error).", "primitive", "result")
	c.hold = histogram("dlock_hold_seconds", "How long leases were held, from the acquire request to Unlock, loss or Close.", HoldBuckets, lock("primitive")...)
	c.lost = counter("dlock_lease_lost_total", "Leases that ended without Unlock, by reason (not_held, deadline, closed, group).", lock("primitive", "reason")...)
	c.renew = histogram("dlock_renew_seconds", "Latency of renewal batches.", RenewBuckets).WithLabelValues()
	c.renewBatch = histogram("dlock_renew_batch_leases", "Leases per renewal batch.", BatchBuckets).WithLabelValues()
	c.renewFailures = counter("dlock_renew_failures_total", "Renewal batches that failed with a store error (retried until the leases' deadlines).").WithLabelValues()
	c.held = gauge("dlock_leases_held", "Leases held now.", "primitive")
	c.waiters = gauge("dlock_waiters", "Lock calls waiting for a busy lock now.", "primitive")
	c.backend = counter("dlock_backend_errors_total", "Store failures, by operation (acquire, release, renew, background release).", "op")
	c.initSeries()
	return c, nil
}

// The label values events carry, known in advance.
var (
	primitives     = []string{"lock", "read", "permit"} // the lease kinds: Lock and RWMutex.Lock, RLock, Acquire
	acquireResults = []string{dlock.ResultAcquired, dlock.ResultBusy, dlock.ResultCanceled, dlock.ResultClosed, dlock.ResultError}
	releaseResults = []string{dlock.ResultReleased, dlock.ResultNotHeld, dlock.ResultCanceled, dlock.ResultClosed, dlock.ResultError}
	lostReasons    = []string{dlock.LostNotHeld, dlock.LostDeadline, dlock.LostClosed, dlock.LostGroup}
	backendOps     = []string{"acquire", "release", "renew", "background release"}
)

// initSeries makes every family exported from New on, so that a dashboard
// shows 0 rather than no data, and an alert on rate or increase sees a
// counter's first event as a rise from 0. Counters and gauges get every
// label set known in advance; histograms one per primitive (the waits of
// calls that acquired), since each costs a series per bucket: their other
// label sets appear with their first event. With WithLockLabel the lock
// label of these series is OtherLock, the one value known in advance.
func (c *Collector) initSeries() {
	withLock := func(lv ...string) []string {
		if c.cfg.lockLabel != nil {
			lv = append(lv, OtherLock)
		}
		return lv
	}
	for _, p := range primitives {
		for _, r := range acquireResults {
			c.acquire.WithLabelValues(withLock(p, r)...)
		}
		c.attempts.WithLabelValues(p)
		c.wait.WithLabelValues(withLock(p, dlock.ResultAcquired)...)
		for _, r := range releaseResults {
			c.release.WithLabelValues(p, r)
		}
		c.hold.WithLabelValues(withLock(p)...)
		for _, r := range lostReasons {
			c.lost.WithLabelValues(withLock(p, r)...)
		}
		c.held.WithLabelValues(p)
		c.waiters.WithLabelValues(p)
	}
	for _, op := range backendOps {
		c.backend.WithLabelValues(op)
	}
}

// MetricNames returns the name of every metric family the Collector
// exports (histograms without their _bucket, _sum and _count suffixes).
func (c *Collector) MetricNames() []string { return append([]string(nil), c.names...) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.all {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.all {
		m.Collect(ch)
	}
}

// lockValue is the "lock" label value for key, capped.
func (c *Collector) lockValue(key string) string {
	if c.cfg.lockLabel == nil {
		return ""
	}
	v := c.cfg.lockLabel(key)
	if v == "" || v == OtherLock {
		return OtherLock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.locks[v]; ok {
		return v
	}
	if len(c.locks) >= c.cfg.maxLocks {
		return OtherLock
	}
	c.locks[v] = struct{}{}
	return v
}

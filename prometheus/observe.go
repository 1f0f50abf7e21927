package dlockprom

import (
	"sync/atomic"

	"github.com/dlockio/dlock"
	"github.com/prometheus/client_golang/prometheus"
)

// Event kinds in the series cache key.
const (
	evAcquire uint8 = iota
	evRelease
	evLost
	evWait
	evBackend
)

// series are the resolved metrics one event updates, looked up once per
// event: after the first event of a label set, an event costs one map
// lookup, not a label slice per metric.
type series struct {
	count    prometheus.Counter  // dlock_acquire_total, _release_total, _lease_lost_total, _backend_errors_total
	duration prometheus.Observer // dlock_wait_seconds (acquire); dlock_hold_seconds (release, lost)
	attempts prometheus.Counter  // acquire only
	held     prometheus.Gauge    // dlock_leases_held (acquire, release, lost); dlock_waiters (wait)
}

// Known label values, indexed for the lock-free path of lookup.
var (
	knownA = []string{"lock", "waiter", "read", "permit", "acquire", "release", "renew", "background release"}
	knownB = []string{"", dlock.ResultAcquired, dlock.ResultBusy, dlock.ResultCanceled, dlock.ResultClosed,
		dlock.ResultError, dlock.ResultReleased, dlock.ResultNotHeld, dlock.LostDeadline}
)

const numEvents = 5

// fastSeries caches the series of known label values without a lock label
// in an array read without locking: an event costs two short string
// switches and an atomic load.
type fastSeries [numEvents][8][9]atomic.Pointer[series]

func index(known []string, v string) int {
	for i, k := range known {
		if k == v {
			return i
		}
	}
	return -1
}

// lookup returns the series of an event of type ev with primitive (or op)
// a, result (or reason) b, for lock name key.
func (c *Collector) lookup(ev uint8, a, b, key string) *series {
	if c.cfg.lockLabel == nil {
		if i, j := index(knownA, a), index(knownB, b); i >= 0 && j >= 0 {
			p := &c.fast[ev][i][j]
			if s := p.Load(); s != nil {
				return s
			}
			s := c.slowLookup(ev, a, b, key)
			p.Store(s)
			return s
		}
	}
	return c.slowLookup(ev, a, b, key)
}

// slowLookup resolves a series through the map, creating it on first use.
func (c *Collector) slowLookup(ev uint8, a, b, key string) *series {
	a, b = label(a), label(b)
	lock := c.lockValue(key)
	k := seriesKey{metric: ev, a: a, b: b, lockID: lock}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cache[k]; ok {
		return s
	}
	withLock := func(lv ...string) []string {
		if lock != "" {
			lv = append(lv, lock)
		}
		return lv
	}
	s := &series{}
	switch ev {
	case evAcquire:
		s.count = c.acquire.WithLabelValues(withLock(a, b)...)
		s.duration = c.wait.WithLabelValues(withLock(a, b)...)
		s.attempts = c.attempts.WithLabelValues(a)
		s.held = c.held.WithLabelValues(a)
	case evRelease:
		s.count = c.release.WithLabelValues(a, b)
		s.duration = c.hold.WithLabelValues(withLock(a)...)
		s.held = c.held.WithLabelValues(a)
	case evLost:
		s.count = c.lost.WithLabelValues(withLock(a, b)...)
		s.duration = c.hold.WithLabelValues(withLock(a)...)
		s.held = c.held.WithLabelValues(a)
	case evWait:
		s.held = c.waiters.WithLabelValues(a)
	case evBackend:
		s.count = c.backend.WithLabelValues(a)
	}
	c.cache[k] = s
	return s
}

// Acquire implements dlock.Observer.
func (c *Collector) Acquire(ev dlock.AcquireEvent) {
	s := c.lookup(evAcquire, ev.Primitive, ev.Result, ev.Key)
	s.count.Inc()
	s.attempts.Add(float64(ev.Attempts))
	s.duration.Observe(ev.Wait.Seconds())
	if ev.Result == dlock.ResultAcquired {
		s.held.Inc()
	}
}

// Release implements dlock.Observer.
func (c *Collector) Release(ev dlock.ReleaseEvent) {
	s := c.lookup(evRelease, ev.Primitive, ev.Result, ev.Key)
	s.count.Inc()
	if ev.WasHeld { // the end of the lease, which is reported once: here or as a loss
		s.duration.Observe(ev.Held.Seconds())
		s.held.Dec()
	}
}

// Lost implements dlock.Observer.
func (c *Collector) Lost(ev dlock.LostEvent) {
	s := c.lookup(evLost, ev.Primitive, ev.Reason, ev.Key)
	s.count.Inc()
	s.duration.Observe(ev.Held.Seconds())
	s.held.Dec()
}

// Renew implements dlock.Observer.
func (c *Collector) Renew(ev dlock.RenewEvent) {
	c.renew.Observe(ev.Latency.Seconds())
	c.renewBatch.Observe(float64(ev.Leases))
	if ev.Err != nil {
		c.renewFailures.Inc()
	}
}

// Wait implements dlock.Observer.
func (c *Collector) Wait(ev dlock.WaitEvent) {
	g := c.lookup(evWait, ev.Primitive, "", "").held
	if ev.Started {
		g.Inc()
	} else {
		g.Dec()
	}
}

// BackendError implements dlock.Observer.
func (c *Collector) BackendError(ev dlock.BackendErrorEvent) {
	c.lookup(evBackend, ev.Op, "", "").count.Inc()
}

// label keeps an empty value from shifting the label values that follow.
func label(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}

var (
	_ dlock.Observer       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

package dlockprom

import (
	"github.com/dlockio/dlock"
	"github.com/prometheus/client_golang/prometheus"
)

// Series ids in the cache key.
const (
	idAcquire uint8 = iota
	idAttempts
	idWait
	idRelease
	idHold
	idLost
	idHeld
	idWaiters
	idBackend
)

// cached returns the series of a vector for the label values (a, b and,
// when perLock, the lock label), resolving it once: after that an event
// costs a map lookup, not a label slice.
func cached[M any](c *Collector, id uint8, with func(...string) M, a, b string, perLock bool, key string) M {
	lock := ""
	if perLock {
		lock = c.lockValue(key)
	}
	k := seriesKey{metric: id, a: a, b: b, lockID: lock}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.cache[k]; ok {
		return m.(M)
	}
	lv := make([]string, 0, 3)
	for _, v := range []string{a, b} {
		if v != "" {
			lv = append(lv, v)
		}
	}
	if lock != "" {
		lv = append(lv, lock)
	}
	m := with(lv...)
	c.cache[k] = m
	return m
}

func (c *Collector) perLock() bool { return c.cfg.lockLabel != nil }

// Acquire implements dlock.Observer.
func (c *Collector) Acquire(ev dlock.AcquireEvent) {
	p := label(ev.Primitive)
	cached(c, idAcquire, c.acquire.WithLabelValues, p, ev.Result, c.perLock(), ev.Key).Inc()
	cached(c, idAttempts, c.attempts.WithLabelValues, p, "", false, "").Add(float64(ev.Attempts))
	cached(c, idWait, c.wait.WithLabelValues, p, ev.Result, c.perLock(), ev.Key).Observe(ev.Wait.Seconds())
	if ev.Result == dlock.ResultAcquired {
		cached(c, idHeld, c.held.WithLabelValues, p, "", false, "").Inc()
	}
}

// Release implements dlock.Observer.
func (c *Collector) Release(ev dlock.ReleaseEvent) {
	p := label(ev.Primitive)
	cached(c, idRelease, c.release.WithLabelValues, p, ev.Result, false, "").Inc()
	if ev.WasHeld {
		c.ended(p, ev.Key, ev.Held.Seconds())
	}
}

// Lost implements dlock.Observer.
func (c *Collector) Lost(ev dlock.LostEvent) {
	p := label(ev.Primitive)
	cached(c, idLost, c.lost.WithLabelValues, p, ev.Reason, c.perLock(), ev.Key).Inc()
	c.ended(p, ev.Key, ev.Held.Seconds())
}

// ended records the end of a lease: once per lease, by Unlock or loss.
func (c *Collector) ended(p, key string, held float64) {
	cached(c, idHold, c.hold.WithLabelValues, p, "", c.perLock(), key).Observe(held)
	cached(c, idHeld, c.held.WithLabelValues, p, "", false, "").Dec()
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
	g := cached(c, idWaiters, c.waiters.WithLabelValues, label(ev.Primitive), "", false, "")
	if ev.Started {
		g.Inc()
	} else {
		g.Dec()
	}
}

// BackendError implements dlock.Observer.
func (c *Collector) BackendError(ev dlock.BackendErrorEvent) {
	cached(c, idBackend, c.backend.WithLabelValues, label(ev.Op), "", false, "").Inc()
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

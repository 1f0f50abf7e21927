package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/redisdriver"
)

// The dlock-trace peer is dlock-plain with a driver wrapper that timestamps
// the steps of every handoff on the shared key: release sent, release
// answered, first release notification seen by any waiting client, and the
// winning acquisition attempt. It exists to explain the handoff numbers and is run
// only when named in -peers.

// handoffTrace is one release and the acquisition that followed it.
type handoffTrace struct {
	relStart, relEnd   time.Time
	notify             time.Time // first release notification in any client
	acqStart, acqEnd   time.Time // the successful attempt
	attempts           int       // acquisition attempts, failed ones included
	attemptBeforeWoken bool      // the winner's attempt was sent before any notification
}

type tracer struct {
	mu   sync.Mutex
	cur  *handoffTrace
	done []handoffTrace
}

var handoffTracer tracer

func (t *tracer) reset() {
	t.mu.Lock()
	t.cur, t.done = nil, nil
	t.mu.Unlock()
}

func (t *tracer) releaseStart(now time.Time) {
	t.mu.Lock()
	if t.cur != nil && !t.cur.acqEnd.IsZero() {
		t.done = append(t.done, *t.cur)
	}
	t.cur = &handoffTrace{relStart: now}
	t.mu.Unlock()
}

func (t *tracer) update(f func(h *handoffTrace)) {
	t.mu.Lock()
	if t.cur != nil {
		f(t.cur)
	}
	t.mu.Unlock()
}

// tracingDriver times the calls of the Redis driver it wraps.
type tracingDriver struct {
	*redisdriver.Driver
}

func (d tracingDriver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	start := time.Now()
	res, err := d.Driver.Acquire(ctx, req)
	end := time.Now()
	handoffTracer.update(func(h *handoffTrace) {
		h.attempts++
		if err == nil && res.Acquired && h.acqEnd.IsZero() {
			h.acqStart, h.acqEnd = start, end
			h.attemptBeforeWoken = h.notify.IsZero() || start.Before(h.notify)
		}
	})
	return res, err
}

func (d tracingDriver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	handoffTracer.releaseStart(time.Now())
	res, err := d.Driver.Release(ctx, reqs)
	end := time.Now()
	handoffTracer.update(func(h *handoffTrace) { h.relEnd = end })
	return res, err
}

func (d tracingDriver) Watch(onRelease func(key string)) (driver.Watcher, error) {
	return d.Driver.Watch(func(key string) {
		now := time.Now()
		handoffTracer.update(func(h *handoffTrace) {
			if h.notify.IsZero() {
				h.notify = now
			}
		})
		onRelease(key)
	})
}

func newTracedDlockWorker(e env) (worker, error) {
	rdb := newRedisClient(e.redisAddr)
	drv, err := redisdriver.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	c, err := dlock.New(tracingDriver{drv})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &dlockWorker{rdb: rdb, c: c, ttl: e.ttl, plain: true}, nil
}

// sharedClient is the one Client of the dlock-shared peer (plain Lock) or
// of dlock-shared-fair (Lock's default), opened by its first worker and
// closed by its last.
type sharedClient struct {
	mu    sync.Mutex
	refs  int
	w     *dlockWorker
	plain bool
}

var (
	sharedPlain = &sharedClient{plain: true}
	sharedFair  = &sharedClient{}
)

// sharedDlockWorker is a worker of a shared peer: all workers use one
// Client, so waiters queue in-process and a release wakes only one, and
// calls that meet in flight go to the store together.
type sharedDlockWorker struct {
	*dlockWorker
	s *sharedClient
}

func newSharedDlockWorker(e env) (worker, error)     { return sharedPlain.worker(e) }
func newSharedFairDlockWorker(e env) (worker, error) { return sharedFair.worker(e) }

func (s *sharedClient) worker(e env) (worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		w, err := newDlockWorker(e)
		if err != nil {
			return nil, err
		}
		s.w = w.(*dlockWorker)
		s.w.plain = s.plain
	}
	s.refs++
	return sharedDlockWorker{s.w, s}, nil
}

func (w sharedDlockWorker) close() {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.refs--; w.s.refs == 0 {
		w.s.w.close()
		w.s.w = nil
	}
}

// handoffBreakdown summarizes the traces of the last handoff run, or
// returns nil when the traced peer did not run.
func handoffBreakdown() *table {
	handoffTracer.mu.Lock()
	traces := slices.Clone(handoffTracer.done)
	handoffTracer.mu.Unlock()
	var total, rel, notify, wake, acq []time.Duration
	var attempts, early int
	for _, h := range traces {
		if h.notify.IsZero() || h.relEnd.IsZero() {
			continue // nobody was waiting: not a handoff
		}
		total = append(total, h.acqEnd.Sub(h.relStart))
		rel = append(rel, h.relEnd.Sub(h.relStart))
		notify = append(notify, h.notify.Sub(h.relStart))
		wake = append(wake, h.acqStart.Sub(h.notify))
		acq = append(acq, h.acqEnd.Sub(h.acqStart))
		attempts += h.attempts
		if h.attemptBeforeWoken {
			early++
		}
	}
	if len(total) == 0 {
		return nil
	}
	t := &table{
		title: fmt.Sprintf("dlock handoff breakdown (dlock-trace peer, %d handoffs)", len(total)),
		head:  []string{"step", "p50", "p90"},
	}
	row := func(name string, d []time.Duration) {
		slices.Sort(d)
		t.add(name, fmtDur(percentile(d, 0.5)), fmtDur(percentile(d, 0.9)))
	}
	row("Unlock: release round trip", rel)
	row("release sent → first waiter's client gets the notification", notify)
	row("notification → winning acquire sent", wake)
	row("winning acquire round trip", acq)
	row("release sent → winning acquire answered", total)
	t.notes = append(t.notes,
		fmt.Sprintf("acquisition attempts per handoff (all clients): %.2f", float64(attempts)/float64(len(total))),
		fmt.Sprintf("handoffs won by an attempt sent before any notification arrived: %d of %d", early, len(total)))
	return t
}

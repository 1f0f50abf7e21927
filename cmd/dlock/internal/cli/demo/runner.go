package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// runner runs the workload once per lock implementation.
type runner struct {
	cfg    Config
	url    string
	prefix string
	orders []order
	p      *printer
}

// instance is one simulated service instance.
type instance struct {
	name   string
	gate   *gate
	locker locker
}

type delivery struct {
	order int
	copy  int // 0 for the first delivery, 1 for the redelivery
}

// run drains the queue with cfg.Workers instances whose locks newLocker makes.
func (r *runner) run(ctx context.Context, label string, newLocker func(redis.UniversalClient, string) (locker, error)) (Metrics, error) {
	r.p.printf("%s: running", label)
	insts := make([]*instance, r.cfg.Workers)
	for i := range insts {
		in, err := r.newInstance(fmt.Sprintf("w%d", i+1), newLocker)
		if err != nil {
			for _, in := range insts[:i] {
				in.locker.close()
			}
			return Metrics{}, err
		}
		insts[i] = in
	}
	defer func() {
		for _, in := range insts {
			in.locker.close()
		}
	}()

	// The queue hands out both copies of an order back to back, so two
	// instances race for the same order as they do after a redelivery.
	queue := make(chan delivery, 2*len(r.orders))
	for _, o := range r.orders {
		queue <- delivery{order: o.id}
		queue <- delivery{order: o.id, copy: 1}
	}
	close(queue)

	w := &workload{r: r, label: label, db: newOrderDB(len(r.orders)), mon: newMonitor()}
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(func() {
			for d := range queue {
				if err := w.handle(ctx, in, d); err != nil {
					cancel(fmt.Errorf("%s: instance %s: %w", label, in.name, err))
					return
				}
			}
		})
	}
	stopProgress := w.reportProgress(ctx)
	wg.Wait()
	stopProgress()
	if err := context.Cause(ctx); err != nil {
		return Metrics{}, err
	}
	m := w.mon.metrics()
	m.OrdersCompleted, m.DoubleProcessed = w.db.tally()
	m.StaleAccepted, m.StaleRejected = w.db.fencing()
	m.Seconds = time.Since(start).Seconds()
	r.p.printf("%s: done in %.1fs", label, m.Seconds)
	return m, nil
}

// newInstance makes an instance with a Redis client of its own, gated so
// that it can be frozen.
func (r *runner) newInstance(name string, newLocker func(redis.UniversalClient, string) (locker, error)) (*instance, error) {
	rdb, err := redisdriver.ParseURL(r.url)
	if err != nil {
		return nil, err
	}
	g := &gate{}
	g.attach(rdb)
	l, err := newLocker(rdb, name)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &instance{name: name, gate: g, locker: l}, nil
}

// workload is one run's shared state.
type workload struct {
	r     *runner
	label string
	db    *orderDB
	mon   *monitor
}

// handle is an instance's processing of one delivery: lock the order, ask
// the database whether it is done, process it, check the lock, write.
func (w *workload) handle(ctx context.Context, in *instance, d delivery) error {
	o := w.r.orders[d.order]
	h, err := in.locker.acquire(ctx, fmt.Sprintf("order:%d", o.id))
	if err != nil {
		return err
	}
	w.mon.acquired(o.id, h.token())
	if overlap, besideLost := w.mon.enter(o.id, h); overlap {
		why := ""
		if besideLost {
			why = " (that instance is frozen and its lease has ended)"
		}
		w.r.p.printf("%s: order %d: %s entered while another instance was still inside%s", w.label, o.id, in.name, why)
	}
	epoch, done, err := w.db.begin(o.id, h.token())
	switch {
	case errors.Is(err, errFenced):
		w.r.p.printf("%s: order %d: fencing refused %s (token %d)", w.label, o.id, in.name, h.token())
	case err != nil:
		return err
	case done: // the redelivered copy of a processed order: nothing to do
	default:
		worked := sleep(h.context(), o.work)
		// The check every holder should make before writing. The naive
		// lock cannot tell; dlock's lease context ends when the lock is lost.
		if worked && h.context().Err() == nil {
			if o.freeze && d.copy == 0 {
				w.r.p.printf("%s: order %d: %s freezes for %v (GC-like pause) right before its write",
					w.label, o.id, in.name, freezeFor(w.r.cfg.TTL))
				in.gate.freeze(ctx, freezeFor(w.r.cfg.TTL))
			}
			if err := w.db.commit(o.id, epoch, h.token()); errors.Is(err, errFenced) {
				w.r.p.printf("%s: order %d: fencing rejected the stale write of %s (token %d)", w.label, o.id, in.name, h.token())
			}
		}
	}
	w.mon.leave(o.id, h)
	foreign, refused, err := h.release(ctx)
	if err != nil {
		return err
	}
	if foreign {
		w.r.p.printf("%s: order %d: %s's release deleted another instance's lock", w.label, o.id, in.name)
	}
	w.mon.released(h, foreign, refused)
	return nil
}

// reportProgress prints a summary line every half second until stopped.
func (w *workload) reportProgress(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				completed, twice := w.db.tally()
				w.r.p.printf("%s: %d/%d orders processed, %d of them more than once", w.label, completed, len(w.r.orders), twice)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// monitor watches critical sections and lock hand-offs.
type monitor struct {
	mu        sync.Mutex
	inside    map[int][]hold
	lastToken map[int]uint64
	m         Metrics
}

func newMonitor() *monitor {
	return &monitor{inside: make(map[int][]hold), lastToken: make(map[int]uint64)}
}

func (m *monitor) acquired(order int, token uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m.Acquisitions++
	if token == 0 {
		return // the naive lock has no tokens
	}
	if token <= m.lastToken[order] {
		m.m.TokenRegressions++
	}
	m.lastToken[order] = token
}

// enter records h inside order's critical section and reports an
// overlap, and whether every instance already inside had lost its lease.
func (m *monitor) enter(order int, h hold) (overlap, besideLost bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	others := m.inside[order]
	m.inside[order] = append(others, h)
	if len(others) == 0 {
		return false, false
	}
	m.m.Overlaps++
	allLost := true
	for _, o := range others {
		allLost = allLost && o.lost()
	}
	if allLost {
		m.m.OverlapsBesideLostLease++
	}
	return true, allLost
}

func (m *monitor) leave(order int, h hold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := m.inside[order]
	for i, x := range in {
		if x == h {
			m.inside[order] = append(in[:i], in[i+1:]...)
			break
		}
	}
}

func (m *monitor) released(h hold, foreign, refused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if foreign {
		m.m.ForeignDeletes++
	}
	if refused {
		m.m.ReleasesRefused++
	}
	if h.lost() {
		m.m.LeasesLost++
	}
}

func (m *monitor) metrics() Metrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m
}

// printer serialises progress lines from many goroutines.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func newPrinter(w io.Writer) *printer {
	if w == nil {
		w = io.Discard
	}
	return &printer{w: w, start: time.Now()}
}

func (p *printer) printf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%5.1fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, a...))
}

package workerproc

import (
	"sync"
	"time"
)

// Log is the append-only list of events a fault test's workers report, in
// arrival order, that the test can wait on. The zero value is ready.
type Log[E any] struct {
	mu      sync.Mutex
	events  []E
	changed chan struct{} // closed and replaced on every event
}

// changedLocked is the channel the next event closes.
func (l *Log[E]) changedLocked() chan struct{} {
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// Add appends e and wakes every waiter.
func (l *Log[E]) Add(e E) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	close(l.changedLocked())
	l.changed = nil
}

// Events returns every event so far.
func (l *Log[E]) Events() []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]E(nil), l.events...)
}

// WaitFor returns the first event at index from or later that matches, and
// the index after it. ok is false when timeout passes first, or when over
// (if not nil) reports that no more events can come: it is asked after
// every event, once the events so far are known not to match.
func (l *Log[E]) WaitFor(from int, timeout time.Duration, match func(E) bool, over func() bool) (e E, next int, ok bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		for ; from < len(l.events); from++ {
			if e := l.events[from]; match(e) {
				l.mu.Unlock()
				return e, from + 1, true
			}
		}
		changed := l.changedLocked()
		l.mu.Unlock()
		if over != nil && over() {
			return e, from, false
		}
		select {
		case <-changed:
		case <-timer.C:
			return e, from, false
		}
	}
}

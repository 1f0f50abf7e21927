package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

const (
	// callerIdle is how long a caller goroutine waits for the next call
	// before it exits.
	callerIdle = 10 * time.Second
	// maxIdleCallers bounds the goroutines kept waiting after a burst.
	maxIdleCallers = 64
)

// callers runs the driver calls that call may abandon, on goroutines it
// keeps between calls. A new goroutine per call starts with a small stack
// and grows it through the store client's call chain every time: in a
// contended fair lock that copying was 5 % of the client's CPU.
type callers struct {
	work chan func() // unbuffered: a send succeeds only if a caller is idle
	idle atomic.Int32
	stop chan struct{}
	wg   sync.WaitGroup
}

func newCallers() *callers {
	return &callers{work: make(chan func()), stop: make(chan struct{})}
}

// run runs f on an idle caller, or on a new one. The engine calls it under
// an op, so never after close.
func (c *callers) run(f func()) {
	select {
	case c.work <- f:
		return
	default:
	}
	c.wg.Add(1)
	go c.loop(f)
}

func (c *callers) loop(f func()) {
	defer c.wg.Done()
	var idle *time.Timer
	for {
		f()
		if c.idle.Add(1) > maxIdleCallers {
			c.idle.Add(-1)
			return
		}
		if idle == nil {
			idle = time.NewTimer(callerIdle)
		} else {
			idle.Reset(callerIdle)
		}
		select {
		case f = <-c.work:
			c.idle.Add(-1)
		case <-idle.C:
			c.idle.Add(-1)
			return
		case <-c.stop:
			c.idle.Add(-1)
			return
		}
	}
}

// close stops the idle callers and waits for them; the engine calls it
// once no op is left, so no call is running or can start.
func (c *callers) close() {
	close(c.stop)
	c.wg.Wait()
}

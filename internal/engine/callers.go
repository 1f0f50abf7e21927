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
//
// idle counts the callers waiting for work that nobody has claimed: run
// claims one (decrements idle) before it sends, so the send always finds
// a caller, and a caller that would stop waiting leaves only if it can
// take itself out of that count; if every idle caller is claimed, a send
// is on its way to it.
type callers struct {
	work chan job // unbuffered
	idle atomic.Int32
	stop chan struct{}
	wg   sync.WaitGroup
}

// job is a driver call to run: a *pending (call.go), which is already on
// the heap, so passing it costs no allocation, as a closure would.
type job interface{ run() }

func newCallers() *callers {
	return &callers{work: make(chan job), stop: make(chan struct{})}
}

// run runs f on an idle caller, or on a new one. The engine calls it under
// an op, so never after close.
func (c *callers) run(f job) {
	for n := c.idle.Load(); n > 0; n = c.idle.Load() {
		if c.idle.CompareAndSwap(n, n-1) {
			c.work <- f // the claimed caller is waiting, or about to
			return
		}
	}
	c.wg.Add(1)
	go c.loop(f)
}

func (c *callers) loop(f job) {
	defer c.wg.Done()
	var timer *time.Timer
	for {
		f.run()
		if !c.becomeIdle() {
			return
		}
		if timer == nil {
			timer = time.NewTimer(callerIdle)
		} else {
			timer.Reset(callerIdle)
		}
		select {
		case f = <-c.work:
		case <-timer.C:
			if !c.leaveIdle() {
				f = <-c.work // claimed meanwhile: the work is on its way
				continue
			}
			return
		case <-c.stop:
			c.leaveIdle() // nothing is claimed after close
			return
		}
	}
}

// becomeIdle counts the caller as idle, unless maxIdleCallers are.
func (c *callers) becomeIdle() bool {
	for {
		n := c.idle.Load()
		if n >= maxIdleCallers {
			return false
		}
		if c.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// leaveIdle takes an idle caller out of the count; false when every idle
// caller has been claimed.
func (c *callers) leaveIdle() bool {
	for {
		n := c.idle.Load()
		if n == 0 {
			return false
		}
		if c.idle.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// close stops the idle callers and waits for them; the engine calls it
// once no op is left, so no call is running or can start.
func (c *callers) close() {
	close(c.stop)
	c.wg.Wait()
}

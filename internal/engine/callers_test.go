package engine

import (
	"sync"
	"testing"
	"time"
)

// waitUntil polls cond until it holds, failing the test after a bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A call after another runs on the goroutine the first one left idle, and
// close ends the idle ones.
func TestCallersReuseTheirGoroutines(t *testing.T) {
	c := newCallers()
	done := make(chan int32, 1)
	c.run(jobFunc(func() { done <- c.idle.Load() }))
	if idle := <-done; idle != 0 {
		t.Fatalf("%d idle callers during the first call", idle)
	}
	waitUntil(t, "the first caller to idle", func() bool { return c.idle.Load() == 1 })
	c.run(jobFunc(func() { done <- c.idle.Load() }))
	if idle := <-done; idle != 0 {
		t.Fatalf("%d idle callers during the second call: it did not take the idle one", idle)
	}
	waitUntil(t, "the caller to idle again", func() bool { return c.idle.Load() == 1 })
	c.close()
	if idle := c.idle.Load(); idle != 0 {
		t.Fatalf("%d idle callers after close", idle)
	}
}

// A burst runs every call at once, and afterwards at most maxIdleCallers
// goroutines stay idle. (close, deferred, waits for every one to exit.)
func TestCallersKeepABoundedNumberIdle(t *testing.T) {
	c := newCallers()
	defer c.close()
	const n = maxIdleCallers + 20
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	block := make(chan struct{})
	for range n {
		c.run(jobFunc(func() {
			defer finished.Done()
			started.Done()
			<-block
		}))
	}
	started.Wait() // all n run at once: n goroutines
	close(block)
	finished.Wait()
	// Each exits or stays idle; those beyond the bound exit.
	waitUntil(t, "maxIdleCallers idle callers", func() bool { return c.idle.Load() == maxIdleCallers })
}

// jobFunc makes a function a job.
type jobFunc func()

func (f jobFunc) run() { f() }

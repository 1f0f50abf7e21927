package engine

import (
	"runtime"
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
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// A call after another runs on the goroutine the first one used, and
// close ends the goroutines kept idle.
func TestCallersReuseTheirGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	c := newCallers()
	done := make(chan int, 1)
	c.run(func() { done <- runtime.NumGoroutine() })
	first := <-done
	if first != base+1 {
		t.Fatalf("%d goroutines during the first call, want %d", first, base+1)
	}
	waitUntil(t, "an idle caller", func() bool { return c.idle.Load() == 1 })
	c.run(func() { done <- runtime.NumGoroutine() })
	if n := <-done; n != first {
		t.Fatalf("%d goroutines during the second call, want %d: it did not reuse the idle one", n, first)
	}
	c.close()
	waitUntil(t, "the callers to exit", func() bool { return runtime.NumGoroutine() == base })
}

// After a burst, at most maxIdleCallers goroutines stay.
func TestCallersKeepABoundedNumberIdle(t *testing.T) {
	base := runtime.NumGoroutine()
	c := newCallers()
	defer c.close()
	const n = maxIdleCallers + 20
	var started, finish sync.WaitGroup
	started.Add(n)
	block := make(chan struct{})
	finish.Add(n)
	for range n {
		c.run(func() {
			defer finish.Done()
			started.Done()
			<-block
		})
	}
	started.Wait()
	if g := runtime.NumGoroutine(); g < base+n {
		t.Fatalf("%d goroutines with %d calls blocked, want at least %d", g, n, base+n)
	}
	close(block)
	finish.Wait()
	waitUntil(t, "the extra callers to exit", func() bool { return runtime.NumGoroutine() <= base+maxIdleCallers })
	if idle := c.idle.Load(); idle > maxIdleCallers {
		t.Fatalf("%d idle callers, want at most %d", idle, maxIdleCallers)
	}
}

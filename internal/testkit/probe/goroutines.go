package probe

import (
	"runtime"
	"sync/atomic"
)

// PeakGoroutines runs f and returns how many goroutines there were just
// before it, and the most seen while it ran (sampled as often as the
// scheduler lets a busy goroutine run, so a short spike can be missed).
func PeakGoroutines(f func()) (before, peak int) {
	var top atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	before = runtime.NumGoroutine()
	go func() {
		defer close(sampled)
		for {
			top.Store(max(top.Load(), int64(runtime.NumGoroutine())))
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	// The sampler itself is one goroutine more than f's.
	return before, int(top.Load()) - 1
}

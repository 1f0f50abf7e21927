package main

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSerialCycle runs one peer's Lock+Unlock cycle on its own key,
// back to back, in this process: the per-cycle counts that do not drift
// with the machine, side by side, for every Redis peer of the serial
// workload. Besides allocs/op it reports ctxsw/op, the context switches of
// the process's threads per cycle (getrusage). For syscalls per cycle,
// run one peer under strace:
//
//	go test -c -o cycle.test . && strace -f -c -o trace.txt ./cycle.test \
//	    -test.run '^$' -test.bench 'SerialCycle/dlock$' -test.benchtime 5000x
func BenchmarkSerialCycle(b *testing.B) {
	srv, err := startRedis()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.stop)
	e := env{redisAddr: srv.addr, ttl: 10 * time.Second, retryDelay: 10 * time.Millisecond}
	for _, p := range allPeers() {
		if p.etcd {
			continue
		}
		b.Run(p.name, func(b *testing.B) {
			w, err := p.newWorker(e)
			if err != nil {
				b.Fatal(err)
			}
			defer w.close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			key := "serial-cycle-" + p.name
			cycle := func() {
				unlock, err := w.lock(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for range 20 {
				cycle()
			}
			b.ReportAllocs()
			before := contextSwitches(b)
			b.ResetTimer()
			for b.Loop() {
				cycle()
			}
			b.StopTimer()
			b.ReportMetric(float64(contextSwitches(b)-before)/float64(b.N), "ctxsw/op")
		})
	}
}

// contextSwitches is the number of context switches, voluntary and not,
// of all the process's threads so far.
func contextSwitches(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Nvcsw + ru.Nivcsw
}

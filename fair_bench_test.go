package dlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/leasecheck"
	"github.com/dlockio/dlock/internal/testkit/probe"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// BenchmarkFairUncontended compares one Lock+Unlock cycle on an
// uncontended key, plain and WithFIFO, against one loopback redis-server
// shared by both sub-benchmarks. Besides ns/op it reports the server's own
// time per cycle (redis-µs/op, from INFO commandstats: every script and
// command run). Run it in interleaved rounds (-count=1 in a loop) to
// compare.
func BenchmarkFairUncontended(b *testing.B) {
	srv := redisserver.Start(b)
	rdb := srv.Client(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	for _, bc := range []struct {
		name string
		opts []dlock.LockOption
	}{
		{"plain", nil},
		{"fifo", []dlock.LockOption{dlock.WithFIFO()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			before := serverUsec(b, rdb)
			for b.Loop() {
				l, err := c.Lock(ctx, "bench-"+bc.name, bc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((serverUsec(b, rdb)-before)/float64(b.N), "redis-µs/op")
		})
	}
}

// BenchmarkFairVersusPlain measures what WithFIFO costs an uncontended
// Lock+Unlock against the plain lock, for the decision of which is the
// default. Every b.N round runs a block of plain cycles and a block of
// fair ones, in alternating order, so that both see the same machine
// noise; it reports each path's time and Redis time per cycle and their
// ratios (fifo/plain).
func BenchmarkFairVersusPlain(b *testing.B) {
	const block = 50
	srv := redisserver.Start(b)
	rdb := srv.Client(b)
	c := leasecheck.NewLocker(b, srv.Addr())
	ctx := context.Background()
	paths := [2][]dlock.LockOption{nil, {dlock.WithFIFO()}}
	var wall [2]time.Duration
	var redisUsec [2]float64
	run := func(p int) {
		start, before := time.Now(), serverUsec(b, rdb)
		for range block {
			l, err := c.Lock(ctx, "versus", paths[p]...)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		wall[p] += time.Since(start)
		redisUsec[p] += serverUsec(b, rdb) - before
	}
	// The warm-up opens connections, loads scripts, subscribes the grant watcher.
	rounds := probe.Versus(b, run, func() { wall, redisUsec = [2]time.Duration{}, [2]float64{} })
	cycles := float64(rounds * block)
	b.ReportMetric(float64(wall[0].Microseconds())/cycles, "plain-µs/cycle")
	b.ReportMetric(float64(wall[1].Microseconds())/cycles, "fifo-µs/cycle")
	b.ReportMetric(redisUsec[0]/cycles, "plain-redis-µs/cycle")
	b.ReportMetric(redisUsec[1]/cycles, "fifo-redis-µs/cycle")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "fifo/plain-time")
	b.ReportMetric(redisUsec[1]/redisUsec[0], "fifo/plain-redis")
}

// serverUsec is the server's total command time so far (µs), INFO excluded.
func serverUsec(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		_, rest, _ := strings.Cut(line, ":")
		// Script commands count the commands they run inside them too:
		// only top-level commands are summed (the script calls, and those
		// the client sends itself), which is what a script call's usec
		// already includes.
		name := strings.TrimPrefix(line[:strings.IndexByte(line, ':')], "cmdstat_")
		if !topLevel[name] {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(rest), ",") {
			if k, v, _ := strings.Cut(f, "="); k == "usec" {
				u, _ := strconv.ParseFloat(v, 64)
				total += u
			}
		}
	}
	return total
}

// topLevel are the commands dlock's Client sends itself.
var topLevel = map[string]bool{"fcall": true, "function|load": true, "evalsha": true, "eval": true, "publish": true, "subscribe": true,
	"unsubscribe": true, "ping": true}

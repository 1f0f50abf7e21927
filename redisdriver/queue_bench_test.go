package redisdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
)

// BenchmarkRedisTimeQueue reports the server's own time (INFO
// commandstats, as BenchmarkRedisTime) of the two steps of a contended
// fair lock, alone: a waiter joining a held name, and a release handing
// the name to the head of its queue. The queue stays as long as in the
// contended benchmark (16 workers): blocks of 15 waiters join a held name,
// then each holder in turn releases, which grants the next. It runs the
// steps as functions (WithFunctions) and as scripts (the default).
//
//	go test -run '^$' -bench RedisTimeQueue -benchtime 30000x ./redisdriver/
func BenchmarkRedisTimeQueue(b *testing.B) {
	for _, m := range codeModes {
		b.Run(m.name, func(b *testing.B) { benchmarkRedisTimeQueue(b, m.opts) })
	}
}

func benchmarkRedisTimeQueue(b *testing.B, opts []Option) {
	d, rdb := benchDriver(b, opts...)
	ctx := context.Background()
	owner := driver.Owner{Host: "bench-host", PID: 4242}
	const block = 15
	req := func(id string) driver.QueueRequest {
		return driver.QueueRequest{Key: "k", ID: id, TTL: time.Hour, Owner: owner, Mode: driver.ModeExclusive,
			Wait: true, Inbox: "0123456789abcdef0123456789abcdef"}
	}
	n := 0
	newID := func() string { n++; return fmt.Sprintf("%032x", n) }
	holder := newID()
	if res, err := d.Enqueue(ctx, req(holder)); err != nil || !res.Granted {
		b.Fatal(res, err)
	}
	scriptTime := func() float64 { return takeUsec(b, rdb, "fcall", "evalsha", "eval") }
	scriptTime()
	var join, handoff float64
	b.ResetTimer()
	for done := 0; done < b.N; {
		ids := make([]string, 0, block)
		for i := 0; i < block && done+i < b.N; i++ {
			id := newID()
			if res, err := d.Enqueue(ctx, req(id)); err != nil || !res.Queued {
				b.Fatal(res, err)
			}
			ids = append(ids, id)
		}
		join += scriptTime()
		for _, id := range ids {
			res, err := d.Release(ctx, []driver.ReleaseRequest{{Kind: driver.KindLock, Key: "k", ID: holder}})
			if err != nil || res[0] != driver.Released {
				b.Fatal(res, err)
			}
			holder = id
		}
		handoff += scriptTime()
		done += len(ids)
	}
	b.StopTimer()
	if info, _, err := d.InspectQueue(ctx, "k"); err != nil || len(info.Waiters) != 0 || len(info.Holders) != 1 ||
		info.Holders[0].ID != holder {
		b.Fatalf("after %d hand-offs: %+v, %v; want the last waiter holding, none waiting", b.N, info, err)
	}
	b.ReportMetric(join/float64(b.N), "redis-us/join")
	b.ReportMetric(handoff/float64(b.N), "redis-us/handoff")
	b.ReportMetric((join+handoff)/float64(b.N), "redis-us/cycle")
}

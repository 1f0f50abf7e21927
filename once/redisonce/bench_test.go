package redisonce_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/redisonce"
	"github.com/dlockio/dlock/redisdriver"
)

func benchProcessor(b *testing.B) *once.Processor {
	srv := redisserver.Start(b)
	rdb := srv.Client(b)
	drv, err := redisdriver.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	locks, err := dlock.New(drv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = locks.Close() })
	store, _ := redisonce.New(rdb)
	p, _ := once.New(locks, store)
	return p
}

var result = []byte("ok")

func work(context.Context, uint64) ([]byte, error) { return result, nil }

// A first delivery: lock, claim, complete, unlock (4 round trips).
func BenchmarkDoFirst(b *testing.B) {
	p := benchProcessor(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := p.Do(ctx, fmt.Sprint("k", i), nil, work); err != nil {
			b.Fatal(err)
		}
	}
}

// A duplicate of a completed delivery: lock, claim (refused, with the
// stored result), unlock (3 round trips).
func BenchmarkDoDuplicate(b *testing.B) {
	p := benchProcessor(b)
	ctx := context.Background()
	if _, err := p.Do(ctx, "k", nil, work); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if r, err := p.Do(ctx, "k", nil, work); err != nil || !r.Replayed {
			b.Fatal(r, err)
		}
	}
}

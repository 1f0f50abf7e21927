package redisonce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/redisonce"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// worker is one service instance: every connection it has (locks, records,
// the guarded resource) goes to addr.
type worker struct {
	p      *once.Processor
	charge func(ctx context.Context, order string, tok uint64) error
}

func newWorker(t *testing.T, addr string, ttl time.Duration) worker {
	t.Helper()
	rdb := redisserver.NewClient(t, addr)
	drv, err := redisdriver.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	locks, err := dlock.New(drv, dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), dlock.WithDefaultTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	store, err := redisonce.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	p, err := once.New(locks, store)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := redisfence.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return worker{p: p, charge: func(ctx context.Context, order string, tok uint64) error {
		_, err := fc.IncrBy(ctx, "charges:"+order, tok, 1)
		return err
	}}
}

func charges(t *testing.T, rdb *redis.Client, order string) int {
	t.Helper()
	v, err := rdb.Get(context.Background(), "charges:"+order).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(v)
	return n
}

// A worker frozen inside its work — cut off from Redis, as a paused
// process is — past its lock's TTL: the duplicate delivery waits for the
// lock, takes the record over and charges; the frozen worker, thawed,
// has its charge refused by the fence and its failure refused by the
// record. One charge, the second worker's result stored.
func TestFaultPausedWorker(t *testing.T) {
	srv := redisserver.Start(t, redisserver.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	proxy := redisserver.NewProxy(t, srv.Addr())
	const ttl = 300 * time.Millisecond
	a, b := newWorker(t, proxy.Addr(), ttl), newWorker(t, srv.Addr(), ttl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const order = "order:42"
	inside, thaw := make(chan uint64, 1), make(chan struct{})
	aErr := make(chan error, 1)
	go func() {
		_, err := a.p.Do(ctx, order, []byte("charge 10"), func(_ context.Context, tok uint64) ([]byte, error) {
			inside <- tok
			<-thaw // frozen: ignores its ctx, as a paused process cannot see it
			return nil, a.charge(ctx, order, tok)
		})
		aErr <- err
	}()
	aTok := <-inside
	proxy.Blackhole(true)
	res, err := b.p.Do(ctx, order, []byte("charge 10"), func(_ context.Context, tok uint64) ([]byte, error) {
		return []byte(fmt.Sprint("charged by ", tok)), b.charge(ctx, order, tok)
	})
	if err != nil || res.Replayed || res.Token <= aTok {
		t.Fatalf("duplicate delivery: %+v, %v (frozen worker's token %d)", res, err, aTok)
	}
	proxy.Blackhole(false)
	proxy.CloseAll()
	close(thaw)
	err = <-aErr
	if !errors.Is(err, fence.ErrStaleToken) || !errors.Is(err, once.ErrClaimLost) {
		t.Errorf("thawed worker: %v, want ErrStaleToken and ErrClaimLost", err)
	}
	admin := srv.Client(t)
	if n := charges(t, admin, order); n != 1 {
		t.Errorf("order charged %d times", n)
	}
	again, err := a.p.Do(ctx, order, []byte("charge 10"), func(context.Context, uint64) ([]byte, error) {
		t.Error("a later delivery ran the work again")
		return nil, nil
	})
	if err != nil || !again.Replayed || string(again.Value) != string(res.Value) {
		t.Errorf("later delivery: %+v, %v; want the stored %q", again, err, res.Value)
	}
}

// Four workers receive every order, each in its own order, all at once:
// every delivery returns the one result, each order is charged once.
func TestFaultRacingDuplicates(t *testing.T) {
	srv := redisserver.Start(t)
	const workers, orders = 4, 25
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results := make([][orders]once.Result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wk := newWorker(t, srv.Addr(), 2*time.Second)
		wg.Go(func() {
			for _, o := range rand.Perm(orders) {
				order := fmt.Sprint("order:", o)
				res, err := wk.p.Do(ctx, order, []byte(order), func(ctx context.Context, tok uint64) ([]byte, error) {
					return []byte(fmt.Sprint(tok)), wk.charge(ctx, order, tok)
				})
				if err != nil {
					t.Errorf("worker %d, %s: %v", w, order, err)
				}
				results[w][o] = res
			}
		})
	}
	wg.Wait()
	admin := srv.Client(t)
	for o := range orders {
		fresh := 0
		for w := range workers {
			if !results[w][o].Replayed {
				fresh++
			}
			if string(results[w][o].Value) != string(results[0][o].Value) {
				t.Errorf("order %d: worker %d got %q, worker 0 %q", o, w, results[w][o].Value, results[0][o].Value)
			}
		}
		if n := charges(t, admin, fmt.Sprint("order:", o)); n != 1 || fresh != 1 {
			t.Errorf("order %d: charged %d times, %d deliveries not replayed; want 1 and 1", o, n, fresh)
		}
	}
}

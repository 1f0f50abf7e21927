package redisfence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// workerEnv carries a worker's JSON configuration.
const workerEnv = "DLOCK_REDISFENCE_WORKER"

// counterKey is the fenced resource: a hash with the counter in field "v"
// and one field per accepted write ("log:<worker>:<iteration>"), written by
// the same script, so the hash is its own ground truth.
const counterKey = "counter"

type workerConfig struct {
	Name     string        `json:"name"`
	Lock     string        `json:"lock"`     // the lock's redis-server, host:port
	Resource string        `json:"resource"` // the protected redis-server
	Iters    int           `json:"iters"`
	TTL      time.Duration `json:"ttl"`
	Work     time.Duration `json:"work"` // between the read and the write
	// Unfenced writes with plain HSET: the canary.
	Unfenced bool `json:"unfenced,omitempty"`
	// Quorum, when set, names the masters of a quorum lock (host:port
	// each), which then replaces Lock.
	Quorum []string `json:"quorum,omitempty"`
}

// workerMain is a worker process. Events: read (V read), commit (V
// written), stale (refused; Lost: the lease had ended), err, done.
func workerMain(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	emit := workerproc.Emitter(cfg.Name)
	quiet := dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var locker *dlock.Client
	var err error
	if len(cfg.Quorum) > 0 {
		urls := make([]string, len(cfg.Quorum))
		for i, addr := range cfg.Quorum {
			urls[i] = "redis://" + addr
		}
		locker, err = redisdriver.OpenQuorum(urls, quiet)
	} else {
		locker, err = redisdriver.Open("redis://"+cfg.Lock, quiet)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer locker.Close()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Resource, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	f, err := redisfence.New(rdb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	workerproc.Iterate(emit, cfg.Iters, func(i int) (bool, error) {
		return increment(ctx, locker, rdb, f, cfg, i, emit)
	})
	return 0
}

func increment(ctx context.Context, locker *dlock.Client, rdb *redis.Client, f *redisfence.Client, cfg workerConfig, i int, emit func(workerproc.Event)) (bool, error) {
	lease, err := locker.Lock(ctx, "job", dlock.WithTTL(cfg.TTL))
	if err != nil {
		return false, err
	}
	defer func() { _ = lease.Unlock(ctx) }()
	tok := lease.Token()

	// Register the token before reading, so an older holder cannot write
	// between this read and this write.
	if !cfg.Unfenced {
		if err := f.Advance(ctx, counterKey, tok); errors.Is(err, fence.ErrStaleToken) {
			emit(workerproc.Event{K: "stale", I: i, Tok: tok, Lost: lease.Err() != nil})
			return true, nil
		} else if err != nil {
			return false, err
		}
	}
	v, err := rdb.HGet(ctx, counterKey, "v").Int64()
	if errors.Is(err, redis.Nil) {
		v, err = 0, nil
	}
	if err != nil {
		return false, err
	}
	emit(workerproc.Event{K: "read", I: i, Tok: tok, V: v})
	time.Sleep(cfg.Work) // the work; a pause of the whole process lands here

	// No lease check here on purpose: the write must be refused anyway.
	fields := map[string]any{"v": v + 1, fmt.Sprintf("log:%s:%d", cfg.Name, i): strconv.FormatInt(v, 10)}
	if cfg.Unfenced {
		err = rdb.HSet(ctx, counterKey, fields).Err()
	} else {
		_, err = f.HSet(ctx, counterKey, tok, fields)
	}
	lost := lease.Err() != nil
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		emit(workerproc.Event{K: "stale", I: i, Tok: tok, Lost: lost})
		return true, nil
	case err != nil:
		return false, err
	}
	emit(workerproc.Event{K: "commit", I: i, Tok: tok, V: v + 1, Lost: lost})
	return true, nil
}

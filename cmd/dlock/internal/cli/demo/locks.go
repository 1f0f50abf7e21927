package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/redis/go-redis/v9"
)

// locker is one instance's way of taking an order's lock.
type locker interface {
	acquire(ctx context.Context, key string) (hold, error)
	close()
}

// hold is one acquisition.
type hold interface {
	// token is the fencing token, 0 for the naive lock.
	token() uint64
	// context ends when the holder knows the lock is lost; the naive lock
	// never knows.
	context() context.Context
	lost() bool
	// release gives the lock back and reports whether it deleted someone
	// else's lock, or was refused because the lock was no longer ours.
	release(ctx context.Context) (foreign, refused bool, err error)
}

// naiveLocker is the hand-rolled lock from the incident: SETNX, then
// EXPIRE as a separate command, no renewal, and DEL to release.
type naiveLocker struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	name   string
	seq    int // the instance's one worker goroutine is the only user
}

// naivePoll is how often a naive waiter retries SETNX.
const naivePoll = 10 * time.Millisecond

func (n *naiveLocker) acquire(ctx context.Context, key string) (hold, error) {
	k := n.prefix + "naive:" + key
	n.seq++
	val := fmt.Sprintf("%s/%d", n.name, n.seq) // lets the demo see whose lock a DEL removed
	t := time.NewTicker(naivePoll)
	defer t.Stop()
	for {
		ok, err := n.rdb.SetNX(ctx, k, val, 0).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			if err := n.rdb.PExpire(ctx, k, n.ttl).Err(); err != nil {
				return nil, err
			}
			return &naiveHold{n: n, key: k, val: val}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (n *naiveLocker) close() { _ = n.rdb.Close() }

type naiveHold struct {
	n        *naiveLocker
	key, val string
}

func (h *naiveHold) token() uint64            { return 0 }
func (h *naiveHold) context() context.Context { return context.Background() }
func (h *naiveHold) lost() bool               { return false }

func (h *naiveHold) release(ctx context.Context) (bool, bool, error) {
	// The DEL is unconditional, as in the incident; the GET in the same
	// MULTI only lets the demo see whose lock it removed.
	var get *redis.StringCmd
	_, err := h.n.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, h.key)
		p.Del(ctx, h.key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, false, err
	}
	v := get.Val()
	return v != "" && v != h.val, false, nil
}

// dlockLocker takes locks with a dlock Client of the instance's own.
type dlockLocker struct {
	rdb  redis.UniversalClient
	c    *dlock.Client
	ttl  time.Duration
	meta string // owner metadata naming this instance
}

func newDlockLocker(rdb redis.UniversalClient, prefix, name string, ttl time.Duration) (*dlockLocker, error) {
	drv, err := redisdriver.New(rdb, redisdriver.WithPrefix(prefix))
	if err != nil {
		return nil, err
	}
	meta := "dlock demo " + name
	c, err := dlock.New(drv,
		dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), // the demo reports losses itself
		dlock.WithOwnerMeta(meta))
	if err != nil {
		return nil, err
	}
	return &dlockLocker{rdb: rdb, c: c, ttl: ttl, meta: meta}, nil
}

func (d *dlockLocker) acquire(ctx context.Context, key string) (hold, error) {
	l, err := d.c.Lock(ctx, key, dlock.WithTTL(d.ttl))
	if err != nil {
		return nil, err
	}
	return &dlockHold{d: d, l: l}, nil
}

func (d *dlockLocker) close() {
	_ = d.c.Close()
	_ = d.rdb.Close()
}

type dlockHold struct {
	d *dlockLocker
	l *dlock.Lease
}

func (h *dlockHold) token() uint64            { return h.l.Token() }
func (h *dlockHold) context() context.Context { return h.l.Context() }
func (h *dlockHold) lost() bool               { return errors.Is(h.l.Err(), dlock.ErrLockLost) }

func (h *dlockHold) release(ctx context.Context) (bool, bool, error) {
	// Look first: a release that reports success while the store showed
	// another instance holding the lock would have deleted that instance's
	// lock. (An instance has one worker, so its only hold is this one.)
	before, held, err := h.d.c.Inspect(ctx, h.l.Key())
	if err != nil {
		return false, false, err
	}
	err = h.l.Unlock(ctx)
	refused := errors.Is(err, dlock.ErrNotHeld)
	if err != nil && !refused {
		return false, false, err
	}
	return err == nil && held && before.Owner.Meta != h.d.meta, refused, nil
}

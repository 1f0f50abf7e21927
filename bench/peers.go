package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// env is what every peer needs to connect: store addresses and the lock
// settings shared by all peers.
type env struct {
	redisAddr  string
	etcdAddr   string        // empty when etcd is unavailable
	ttl        time.Duration // lock TTL in the cycle workloads
	retryDelay time.Duration // sleep between attempts of polling peers
	// quorumAddrs are the masters of the quorum peers (quorum.go).
	quorumAddrs []string
	// zkServers are the ZooKeeper peers' ensemble, host:port,... (zk.go).
	zkServers string
}

// unlockFunc releases one acquisition.
type unlockFunc func(ctx context.Context) error

// worker is one lock user; workers model separate processes, so each has
// its own connections and client state. A worker is used by one goroutine.
type worker interface {
	lock(ctx context.Context, key string) (unlockFunc, error)
	close()
}

// holder acquires many locks and keeps them renewed until close.
type holder interface {
	hold(ctx context.Context, key string) error
	// lost counts held locks that are no longer valid.
	lost() int
	close()
}

// peer is one lock implementation under test.
type peer struct {
	name string
	// waits says how a blocked Lock learns that the lock became free.
	waits     string
	newWorker func(e env) (worker, error)
	// newHolder is nil for implementations without automatic renewal.
	newHolder func(e env, ttl time.Duration, n int) (holder, error)
	// etcd: the peer runs on the etcd server, not Redis.
	etcd bool
	// quorum: the peer runs on the quorum's masters (quorum.go).
	quorum bool
	// replica: the peer needs the Redis server to have a replica (replica.go).
	replica bool
	// zk: the peer runs on a ZooKeeper ensemble (zk.go).
	zk bool
}

// allPeers lists the implementations in table order.
func allPeers() []peer {
	return []peer{
		{name: "dlock", waits: "FIFO queue in Redis (Lock's default): the release grants the head and notifies only it", newWorker: newDlockWorker, newHolder: newDlockHolder},
		{name: "dlock-plain", waits: "Lock with WithoutFIFO: pub/sub release notification, TTL fallback", newWorker: newDlockPlainWorker},
		{name: "raw", waits: "polling", newWorker: newRawWorker},
		{name: "redislock", waits: "polling (linear backoff)", newWorker: newRedislockWorker},
		{name: "redsync", waits: "polling", newWorker: newRedsyncWorker},
		{name: "rueidislock", waits: "client-side caching invalidation", newWorker: newRueidisWorker, newHolder: newRueidisHolder},
		{name: "etcd", waits: "watch on the previous key", newWorker: newEtcdWorker, newHolder: newEtcdHolder, etcd: true},
		{name: "dlock-etcd", waits: "FIFO queue in etcd (Lock's default): the release grants the head and announces it on the head's watched inbox", newWorker: newDlockEtcdWorker, newHolder: newDlockEtcdHolder, etcd: true},
		{name: "dlock-etcd-plain", waits: "Lock with WithoutFIFO: etcd watch on the lock key, TTL fallback", newWorker: newDlockEtcdPlainWorker, etcd: true},
	}
}

// diagnosticPeers run only when named in -peers.
func diagnosticPeers() []peer {
	return []peer{
		{name: "dlock-trace", waits: "as dlock-plain; the driver is wrapped to time each handoff step", newWorker: newTracedDlockWorker},
		{name: "raw-fifo", waits: "FIFO list in Redis: the release pops the head and publishes to it (a floor, not a usable lock)", newWorker: newRawFIFOWorker},
		{name: "min-fifo", waits: "raw-fifo plus what the fair lock's promises need of the store: waiter expiry, fencing, ownership check (a floor, not a usable lock)", newWorker: newMinFIFOWorker},
		{name: "dlock-shared", waits: "as dlock-plain, but all workers share one Client: waiters queue in-process and a release wakes one", newWorker: newSharedDlockWorker},
		{name: "dlock-shared-fair", waits: "as dlock (Lock's default, FIFO), but all workers share one Client", newWorker: newSharedFairDlockWorker},
		{name: "etcd-txn", waits: "as etcd; Unlock is one Txn that deletes the key if it is still there and writes a release marker, as dlock-etcd's release does (a floor, not a usable lock: see etcd.go)", newWorker: newEtcdTxnWorker, etcd: true},
		{name: "dlock-etcd-fifo", waits: "Lock with WithFIFO on etcd, whatever the driver's default", newWorker: newDlockEtcdFIFOWorker, etcd: true},
		{name: "dlock-inline", waits: "as dlock, with driver calls on the caller's goroutine (a floor, not a usable lock: see inline.go)", newWorker: newInlineDlockWorker},
	}
}

func newRedisClient(addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32})
	rdb.AddHook(countHook{})
	return rdb
}

// --- dlock ---

type dlockWorker struct {
	rdb   *redis.Client
	c     *dlock.Client
	ttl   time.Duration
	plain bool // WithoutFIFO: the dlock-plain peer and the diagnostic ones
}

func newDlockClient(addr string) (*redis.Client, *dlock.Client, error) {
	rdb := newRedisClient(addr)
	drv, err := redisdriver.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	c, err := dlock.New(drv)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, c, nil
}

func newDlockWorker(e env) (worker, error) {
	rdb, c, err := newDlockClient(e.redisAddr)
	if err != nil {
		return nil, err
	}
	return &dlockWorker{rdb: rdb, c: c, ttl: e.ttl}, nil
}

func (w *dlockWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	opts := []dlock.LockOption{dlock.WithTTL(w.ttl)}
	if w.plain {
		opts = append(opts, dlock.WithoutFIFO())
	}
	l, err := w.c.Lock(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (w *dlockWorker) close() {
	_ = w.c.Close()
	_ = w.rdb.Close()
}

type dlockHolder struct {
	rdb *redis.Client
	dlockLeases
}

// dlockLeases is the holding side of the dlock and dlock-etcd holders:
// leases taken with Lock and kept, renewed by their Client, until close.
type dlockLeases struct {
	c      *dlock.Client
	ttl    time.Duration
	leases chan *dlock.Lease
}

func newDlockLeases(c *dlock.Client, ttl time.Duration, n int) dlockLeases {
	return dlockLeases{c: c, ttl: ttl, leases: make(chan *dlock.Lease, n)}
}

func newDlockHolder(e env, ttl time.Duration, n int) (holder, error) {
	rdb, c, err := newDlockClient(e.redisAddr)
	if err != nil {
		return nil, err
	}
	return &dlockHolder{rdb: rdb, dlockLeases: newDlockLeases(c, ttl, n)}, nil
}

func (h *dlockLeases) hold(ctx context.Context, key string) error {
	l, err := h.c.Lock(ctx, key, dlock.WithTTL(h.ttl))
	if err != nil {
		return err
	}
	h.leases <- l
	return nil
}

func (h *dlockLeases) lost() int {
	n := 0
	for range len(h.leases) {
		l := <-h.leases
		if l.Err() != nil {
			n++
		}
		h.leases <- l
	}
	return n
}

func (h *dlockHolder) close() {
	_ = h.c.Close() // releases every lease still held
	_ = h.rdb.Close()
}

// --- raw SET NX PX floor ---

// rawRelease deletes the key only if it still holds our token.
var rawRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

type rawWorker struct {
	rdb *redis.Client
	e   env
}

func newRawWorker(e env) (worker, error) {
	return &rawWorker{rdb: newRedisClient(e.redisAddr), e: e}, nil
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (w *rawWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	token := randomToken()
	var timer *time.Timer
	for {
		ok, err := w.rdb.SetNX(ctx, key, token, w.e.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if timer == nil {
			timer = time.NewTimer(w.e.retryDelay)
			defer timer.Stop()
		} else {
			timer.Reset(w.e.retryDelay)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return func(ctx context.Context) error {
		n, err := rawRelease.Run(ctx, w.rdb, []string{key}, token).Int()
		if err == nil && n != 1 {
			err = errors.New("raw: lock not held at release")
		}
		return err
	}, nil
}

func (w *rawWorker) close() { _ = w.rdb.Close() }

// --- bsm/redislock ---

type redislockWorker struct {
	rdb  *redis.Client
	c    *redislock.Client
	opts *redislock.Options
	ttl  time.Duration
}

func newRedislockWorker(e env) (worker, error) {
	rdb := newRedisClient(e.redisAddr)
	return &redislockWorker{
		rdb:  rdb,
		c:    redislock.New(rdb),
		opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(e.retryDelay)},
		ttl:  e.ttl,
	}, nil
}

func (w *redislockWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l, err := w.c.Obtain(ctx, key, w.ttl, w.opts)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (w *redislockWorker) close() { _ = w.rdb.Close() }

// --- go-redsync/redsync ---

type redsyncWorker struct {
	rdb     *redis.Client
	rs      *redsync.Redsync
	e       env
	mutexes map[string]*redsync.Mutex
}

func newRedsyncWorker(e env) (worker, error) {
	rdb := newRedisClient(e.redisAddr)
	return &redsyncWorker{
		rdb: rdb, rs: redsync.New(redsyncgoredis.NewPool(rdb)), e: e,
		mutexes: make(map[string]*redsync.Mutex),
	}, nil
}

func (w *redsyncWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	m := w.mutexes[key]
	if m == nil {
		m = w.rs.NewMutex(key, redsync.WithExpiry(w.e.ttl), redsync.WithTries(math.MaxInt32),
			redsync.WithRetryDelay(w.e.retryDelay))
		w.mutexes[key] = m
	}
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: lock not held at release")
		}
		return err
	}, nil
}

func (w *redsyncWorker) close() { _ = w.rdb.Close() }

// --- rueidislock ---

func newRueidisLocker(addr string, ttl time.Duration) (rueidislock.Locker, error) {
	return rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		ClientBuilder: func(o rueidis.ClientOption) (rueidis.Client, error) {
			c, err := rueidis.NewClient(o)
			if err != nil {
				return nil, err
			}
			return countingRueidis{c}, nil
		},
		KeyMajority:    1,
		KeyValidity:    ttl,
		ExtendInterval: ttl / 3, // the same renewal period as dlock
		NoLoopTracking: true,    // documented as faster on Redis >= 7.0.5
	})
}

type rueidisWorker struct{ l rueidislock.Locker }

func newRueidisWorker(e env) (worker, error) {
	l, err := newRueidisLocker(e.redisAddr, e.ttl)
	if err != nil {
		return nil, err
	}
	return &rueidisWorker{l: l}, nil
}

func (w *rueidisWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	_, cancel, err := w.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	// cancel releases the key and returns once the release was sent.
	return func(context.Context) error { cancel(); return nil }, nil
}

func (w *rueidisWorker) close() { w.l.Close() }

type rueidisHeld struct {
	ctx    context.Context
	cancel context.CancelFunc
}

type rueidisHolder struct {
	l    rueidislock.Locker
	held chan rueidisHeld
}

func newRueidisHolder(e env, ttl time.Duration, n int) (holder, error) {
	l, err := newRueidisLocker(e.redisAddr, ttl)
	if err != nil {
		return nil, err
	}
	return &rueidisHolder{l: l, held: make(chan rueidisHeld, n)}, nil
}

func (h *rueidisHolder) hold(ctx context.Context, key string) error {
	// The lock lives as long as the context it was taken with, so that
	// context must outlive ctx, which only bounds the acquisition. Single
	// attempts are retried rather than calling WithContext: under load an
	// attempt can time out, and WithContext then waits for a change
	// notification of the key, which a free key never sends.
	for {
		lctx, cancel, err := h.l.TryWithContext(context.Background(), key)
		if err == nil {
			h.held <- rueidisHeld{ctx: lctx, cancel: cancel}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("rueidislock: %w (last attempt: %v)", ctx.Err(), err)
		}
	}
}

func (h *rueidisHolder) lost() int {
	n := 0
	for range len(h.held) {
		x := <-h.held
		if x.ctx.Err() != nil {
			n++
		}
		h.held <- x
	}
	return n
}

func (h *rueidisHolder) close() {
	close(h.held)
	all := make([]rueidisHeld, 0, len(h.held))
	for x := range h.held {
		all = append(all, x)
	}
	// Each cancel waits for its release round trip: run them side by side.
	parallelDo(len(all), 64, func(i int) { all[i].cancel() })
	h.l.Close()
}

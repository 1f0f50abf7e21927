package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/redisdriver"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// quorumMasters is how many independent redis-servers the quorum peers
// share (docs/quorum.md).
const quorumMasters = 5

// quorumPeers are the Redlock peers: dlock's Quorum and redsync, each over
// the same quorumMasters masters, which bench starts when one is named in
// -peers.
func quorumPeers() []peer {
	return []peer{
		{name: "dlock-quorum", waits: "Lock on redisdriver's Quorum of 5 masters: pub/sub release notification on each, TTL fallback", newWorker: newDlockQuorumWorker, quorum: true},
		{name: "redsync-quorum", waits: "polling; redsync's Redlock over the same 5 masters", newWorker: newRedsyncQuorumWorker, quorum: true},
	}
}

// quorumServers are the masters of the quorum peers.
type quorumServers struct {
	srvs   []*server
	admins []*redis.Client
}

// startQuorum starts the masters and waits until each has been up for the
// TTL: a Quorum keeps a master restarted less than a TTL ago out of votes
// (redisdriver.WithRestartDelay), and a fresh server looks just restarted.
func startQuorum(ttl time.Duration) (*quorumServers, error) {
	q := &quorumServers{}
	for range quorumMasters {
		srv, err := startRedis()
		if err != nil {
			q.stop()
			return nil, err
		}
		stopOnSignal(srv)
		q.srvs = append(q.srvs, srv)
		q.admins = append(q.admins, redis.NewClient(&redis.Options{Addr: srv.addr}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), ttl+30*time.Second)
	defer cancel()
	need := int64(math.Ceil(ttl.Seconds()))
	for _, a := range q.admins {
		for {
			up, err := uptime(ctx, a)
			if err != nil {
				q.stop()
				return nil, err
			}
			if up >= need {
				break
			}
			time.Sleep(200 * time.Millisecond) // polls the server's uptime
		}
	}
	return q, nil
}

func uptime(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "uptime_in_seconds:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("INFO server: no uptime_in_seconds")
}

func (q *quorumServers) addrs() []string {
	out := make([]string, len(q.srvs))
	for i, s := range q.srvs {
		out[i] = s.addr
	}
	return out
}

func (q *quorumServers) stop() {
	for _, a := range q.admins {
		_ = a.Close()
	}
	for _, s := range q.srvs {
		s.stop()
	}
}

// flush empties every master between runs.
func (q *quorumServers) flush(ctx context.Context) error {
	var errs []error
	for _, a := range q.admins {
		errs = append(errs, a.FlushAll(ctx).Err())
	}
	return errors.Join(errs...)
}

// usage sums the masters' commands and CPU; INFO counts itself on each.
func (q *quorumServers) usage(ctx context.Context) (commands, subs int64, cpu float64, err error) {
	for _, a := range q.admins {
		s, e := readRedisStats(ctx, a)
		if e != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", a.Options().Addr, e)
		}
		commands += s.commands - 1
		subs += s.subs
		cpu += s.cpu
	}
	return commands, subs, cpu, nil
}

// --- dlock's Quorum ---

type dlockQuorumWorker struct {
	rdbs []*redis.Client
	c    *dlock.Client
	ttl  time.Duration
}

func newDlockQuorumWorker(e env) (worker, error) {
	w := &dlockQuorumWorker{ttl: e.ttl}
	clients := make([]redis.UniversalClient, len(e.quorumAddrs))
	for i, addr := range e.quorumAddrs {
		rdb := newRedisClient(addr)
		w.rdbs = append(w.rdbs, rdb)
		clients[i] = rdb
	}
	q, err := redisdriver.NewQuorum(clients)
	if err != nil {
		w.close()
		return nil, err
	}
	if w.c, err = dlock.New(q); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *dlockQuorumWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l, err := w.c.Lock(ctx, key, dlock.WithTTL(w.ttl))
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

func (w *dlockQuorumWorker) close() {
	if w.c != nil {
		_ = w.c.Close()
	}
	for _, rdb := range w.rdbs {
		_ = rdb.Close()
	}
}

// --- redsync over the same masters ---

type redsyncQuorumWorker struct {
	redsyncWorker
	rdbs []*redis.Client
}

func newRedsyncQuorumWorker(e env) (worker, error) {
	w := &redsyncQuorumWorker{}
	pools := make([]redsyncredis.Pool, len(e.quorumAddrs))
	for i, addr := range e.quorumAddrs {
		rdb := newRedisClient(addr)
		w.rdbs = append(w.rdbs, rdb)
		pools[i] = redsyncgoredis.NewPool(rdb)
	}
	w.redsyncWorker = redsyncWorker{rs: redsync.New(pools...), e: e, mutexes: make(map[string]*redsync.Mutex)}
	return w, nil
}

func (w *redsyncQuorumWorker) close() {
	for _, rdb := range w.rdbs {
		_ = rdb.Close()
	}
}

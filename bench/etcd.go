package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// errNoEtcd marks the etcd peer as skipped.
var errNoEtcd = errors.New("etcd not available")

// etcdPrefix starts every lock key the etcd peer writes.
const etcdPrefix = "/dlock-bench/"

// ttlSeconds converts a TTL to etcd's whole seconds, rounding up.
func ttlSeconds(ttl time.Duration) int {
	return max(1, int((ttl+time.Second-1)/time.Second))
}

// etcdSession opens a client and a session whose lease is kept alive by
// the client (every TTL/3) until the session is closed.
func etcdSession(addr string, ttl time.Duration) (*clientv3.Client, *concurrency.Session, error) {
	if addr == "" {
		return nil, nil, errNoEtcd
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{addr},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(countUnary), grpc.WithChainStreamInterceptor(countStream)},
		Logger:      zap.NewNop(), // cancelled waits at the end of a run are not news
	})
	if err != nil {
		return nil, nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttlSeconds(ttl)))
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return cli, s, nil
}

// etcdWorker has its own client and session: mutexes of one session do not
// exclude each other, so a shared session would give no exclusion.
type etcdWorker struct {
	cli     *clientv3.Client
	s       *concurrency.Session
	mutexes map[string]*concurrency.Mutex
}

func newEtcdWorker(e env) (worker, error) {
	cli, s, err := etcdSession(e.etcdAddr, e.ttl)
	if err != nil {
		return nil, err
	}
	return &etcdWorker{cli: cli, s: s, mutexes: make(map[string]*concurrency.Mutex)}, nil
}

func (w *etcdWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	m := w.mutexes[key]
	if m == nil {
		m = concurrency.NewMutex(w.s, etcdPrefix+key)
		w.mutexes[key] = m
	}
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (w *etcdWorker) close() {
	_ = w.s.Close()
	_ = w.cli.Close()
}

// etcdHolder keeps every lock under one session: one lease, one keep-alive
// stream, whatever the number of keys. Keys are distinct, so the shared
// session's lack of mutual exclusion does not matter here.
type etcdHolder struct {
	cli *clientv3.Client
	s   *concurrency.Session

	mu sync.Mutex
	n  int
}

func newEtcdHolder(e env, ttl time.Duration, _ int) (holder, error) {
	cli, s, err := etcdSession(e.etcdAddr, ttl)
	if err != nil {
		return nil, err
	}
	return &etcdHolder{cli: cli, s: s}, nil
}

func (h *etcdHolder) hold(ctx context.Context, key string) error {
	if err := concurrency.NewMutex(h.s, etcdPrefix+key).Lock(ctx); err != nil {
		return err
	}
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}

func (h *etcdHolder) lost() int {
	select {
	case <-h.s.Done(): // the session's lease expired: every lock is gone
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.n
	default:
		return 0
	}
}

func (h *etcdHolder) close() {
	_ = h.s.Close() // revokes the lease, deleting every lock key
	_ = h.cli.Close()
}

// etcdTxnWorker is the etcd-txn diagnostic peer: the etcd peer with the
// writes dlock-etcd's release makes, to tell what those cost from what
// the rest of dlock does. Its Unlock is one Txn that deletes the key only
// if it is still there (a compare, where Mutex.Unlock deletes blindly)
// and writes a release marker beside it, on a lease of its own, as
// dlock-etcd's release does. A floor, not a usable lock: the compare does
// not tell this acquisition's key from a later one of the same session.
type etcdTxnWorker struct {
	*etcdWorker
	markers clientv3.LeaseID
	n       int
}

func newEtcdTxnWorker(e env) (worker, error) {
	w, err := newEtcdWorker(e)
	if err != nil {
		return nil, err
	}
	ew := w.(*etcdWorker)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := ew.cli.Grant(ctx, 60)
	if err != nil {
		ew.close()
		return nil, err
	}
	return &etcdTxnWorker{etcdWorker: ew, markers: lease.ID}, nil
}

func (w *etcdTxnWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	m := w.mutexes[key]
	if m == nil {
		m = concurrency.NewMutex(w.s, etcdPrefix+key)
		w.mutexes[key] = m
	}
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		w.n++
		marker := fmt.Sprintf("%sreleased/%s/%x/%d", etcdPrefix, key, int64(w.s.Lease()), w.n)
		resp, err := w.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(m.Key()), ">", 0)).
			Then(clientv3.OpDelete(m.Key()), clientv3.OpPut(marker, "", clientv3.WithLease(w.markers))).
			Commit()
		if err == nil && !resp.Succeeded {
			err = errors.New("etcd-txn: lock key gone before its release")
		}
		return err
	}, nil
}

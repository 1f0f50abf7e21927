package main

import (
	"context"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// --- dlock on etcd ---

// etcdDlock is a dlock Client on etcd and the etcd client under it.
type etcdDlock struct {
	c   *dlock.Client
	cli *clientv3.Client
}

// openEtcdDlock makes a dlock Client on its own etcd client, whose
// requests are counted like the etcd peer's.
func openEtcdDlock(addr string) (etcdDlock, error) {
	if addr == "" {
		return etcdDlock{}, errNoEtcd
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{addr},
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(countUnary),
			grpc.WithChainStreamInterceptor(countStream),
		},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return etcdDlock{}, err
	}
	drv, err := etcddriver.New(cli, etcddriver.WithPrefix("/dlock-bench-dlock/"))
	if err != nil {
		_ = cli.Close()
		return etcdDlock{}, err
	}
	c, err := dlock.New(drv)
	if err != nil {
		_ = cli.Close()
		return etcdDlock{}, err
	}
	return etcdDlock{c: c, cli: cli}, nil
}

// etcdLockTTL is ttl as etcd leases take it: whole seconds, at least the
// server's 2 s minimum (the -smoke run asks for less).
func etcdLockTTL(ttl time.Duration) time.Duration {
	return max(etcddriver.MinTTL, (ttl+time.Second-1)/time.Second*time.Second)
}

func (e etcdDlock) close() {
	_ = e.c.Close() // releases what is held, revokes the driver's leases
	_ = e.cli.Close()
}

type dlockEtcdWorker struct {
	etcdDlock
	ttl  time.Duration
	opts []dlock.LockOption // besides the TTL: the variant's WithFIFO or WithoutFIFO
}

func newDlockEtcdWorker(e env) (worker, error) {
	d, err := openEtcdDlock(e.etcdAddr)
	if err != nil {
		return nil, err
	}
	return &dlockEtcdWorker{etcdDlock: d, ttl: etcdLockTTL(e.ttl)}, nil
}

// newDlockEtcdPlainWorker is a worker of the dlock-etcd-plain peer: Lock
// with WithoutFIFO on etcd, woken by an etcd watch of the lock key and
// racing the other waiters.
func newDlockEtcdPlainWorker(e env) (worker, error) {
	w, err := newDlockEtcdWorker(e)
	if err != nil {
		return nil, err
	}
	w.(*dlockEtcdWorker).opts = []dlock.LockOption{dlock.WithoutFIFO()}
	return w, nil
}

// newDlockEtcdFIFOWorker is a worker of the dlock-etcd-fifo peer: Lock
// with WithFIFO on etcd, whatever the driver's default.
func newDlockEtcdFIFOWorker(e env) (worker, error) {
	w, err := newDlockEtcdWorker(e)
	if err != nil {
		return nil, err
	}
	w.(*dlockEtcdWorker).opts = []dlock.LockOption{dlock.WithFIFO()}
	return w, nil
}

func (w *dlockEtcdWorker) lock(ctx context.Context, key string) (unlockFunc, error) {
	l, err := w.c.Lock(ctx, key, append([]dlock.LockOption{dlock.WithTTL(w.ttl)}, w.opts...)...)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

type dlockEtcdHolder struct {
	etcd etcdDlock
	dlockLeases
}

func newDlockEtcdHolder(e env, ttl time.Duration, n int) (holder, error) {
	d, err := openEtcdDlock(e.etcdAddr)
	if err != nil {
		return nil, err
	}
	return &dlockEtcdHolder{etcd: d, dlockLeases: newDlockLeases(d.c, etcdLockTTL(ttl), n)}, nil
}

func (h *dlockEtcdHolder) close() { h.etcd.close() }

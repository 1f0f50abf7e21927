package etcddriver

import (
	"context"
	"errors"
	"time"

	"github.com/dlockio/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errLeaseLost is an acquisition whose key was put on a lease that expired
// before the keep-alive sent with it reached etcd: the key goes with the
// lease, so nothing is held. The engine reports it as a backend error.
var errLeaseLost = errors.New("the lease of the acquisition expired as it was taken")

// Acquire implements driver.Driver: one Txn (if the key is absent, put it
// on the pool's lease; else read it), sent together with a keep-alive of
// that lease unless one sent at most keepAliveReuse before this call
// started succeeded (or is in flight).
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	if err := checkID(req.ID); err != nil {
		return driver.AcquireResult{}, err
	}
	ttl, err := ttlSeconds(req.TTL)
	if err != nil {
		return driver.AcquireResult{}, err
	}
	start := time.Now()
	value, err := lockValue{id: req.ID, ttl: req.TTL, since: start, owner: req.Owner}.encode()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	key := d.lockKey(req.Key)
	// A lease can vanish under us (expired while idle, revoked by an
	// operator): then grant a new one and try once more.
	for attempt := 0; ; attempt++ {
		l, err := d.leases.get(ctx, ttl)
		if err != nil {
			return driver.AcquireResult{}, err
		}
		res, err := d.acquireOn(ctx, l, start, key, value, req)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			d.leases.drop(l)
			continue
		}
		return res, err
	}
}

func (d *Driver) acquireOn(ctx context.Context, l *poolLease, start time.Time, key, value string, req driver.AcquireRequest) (driver.AcquireResult, error) {
	// The keep-alive makes the lease last a full TTL from at most
	// keepAliveReuse before now; without it a shared lease last renewed a
	// while ago would expire before the deadline the engine computes for
	// this acquisition.
	wait := d.leases.freshen(ctx, l, start)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0), d.queueEmptyCmp(req.Key)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(l.id))).
		Else(clientv3.OpGet(key), clientv3.OpGet(d.holderPrefix(req.Key), clientv3.WithPrefix(), clientv3.WithLimit(1))).
		Commit()
	kaErr := wait()
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if resp.Succeeded {
		if kaErr != nil {
			// The key may be held on a lease we could not extend: the
			// engine releases it on this error.
			return driver.AcquireResult{}, kaErr
		}
		return driver.AcquireResult{Acquired: true, Token: uint64(resp.Header.Revision)}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		// Free of an exclusive holder, but queued: waiters, which a plain
		// acquisition never jumps, or readers/permit holders, of which
		// one's TTL bounds the wait.
		res := driver.AcquireResult{RetryAfter: -1}
		if hs := resp.Responses[1].GetResponseRange().Kvs; len(hs) > 0 {
			if v, err := decodeQueueValue(hs[0].Value); err == nil && v.TTL > 0 {
				res.RetryAfter = v.TTL
			}
		}
		return res, nil
	}
	kv := kvs[0]
	if ownedBy(kv.Value, req.ID) {
		// Ours already: a retry after a lost reply. It is held for a full
		// TTL from now only once its own lease is kept alive from now.
		ok, err := d.leases.keepAlive(ctx, clientv3.LeaseID(kv.Lease), l.ttl)
		if err != nil {
			return driver.AcquireResult{}, err
		}
		if !ok {
			return driver.AcquireResult{}, errLeaseLost
		}
		return driver.AcquireResult{Acquired: true, Token: uint64(kv.CreateRevision)}, nil
	}
	res := driver.AcquireResult{RetryAfter: -1}
	if v, err := decodeValue(kv.Value); err == nil && v.ttl > 0 {
		// The holder's TTL bounds what its lease has left, and costs no
		// LeaseTimeToLive round trip: a waiter wakes at most one TTL late
		// if the release notification is lost.
		res.RetryAfter = v.ttl
	}
	return res, nil
}

package etcddriver

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Renew implements driver.Driver. Exclusive locks (KindLock, plain or
// granted by the queue: the same key) go in one batch (see renewLocks);
// queued leases one by one (see byKind): a reader's or permit's is a read and a
// keep-alive of its lease; a waiter's place first settles the queue (a
// grant that an expiry allows happens then), and is kept alive only if it
// still waits.
func (d *Driver) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	for _, r := range reqs {
		if err := checkLease(r.Kind, r.ID); err != nil {
			return nil, err
		}
		if _, err := ttlSeconds(r.TTL); err != nil {
			return nil, err
		}
	}
	return byKind(ctx, d, reqs, func(r driver.RenewRequest) driver.Kind { return r.Kind }, d.renewLocks, d.renewQueued)
}

// renewQueued renews one reader, permit or waiter's place, as Renew
// describes.
func (d *Driver) renewQueued(ctx context.Context, r driver.RenewRequest) (bool, error) {
	ttl, _ := ttlSeconds(r.TTL)
	var lease clientv3.LeaseID
	if r.Kind == driver.KindWaiter {
		out, err := d.step(ctx, r.Key, nil, r.ID)
		if err != nil {
			return false, err
		}
		if lease = out.probeLease; lease != 0 {
			d.expiry.keepWaiter(r.Key, r.ID, out.rev, r.TTL, out.pred) // still waiting
		} else {
			d.expiry.gone(r.Key, r.ID)
		}
	} else {
		resp, err := d.cli.Get(ctx, d.holderKey(r.Key, r.ID))
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) != 1 {
			return false, nil
		}
		v, err := decodeQueueValue(resp.Kvs[0].Value)
		if err != nil || v.Mode.HolderKind() != r.Kind {
			return false, nil
		}
		lease = clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	if lease == 0 {
		return false, nil
	}
	return d.leases.keepAlive(ctx, lease, ttl)
}

// Release implements driver.Driver. Exclusive locks (KindLock) go in one
// batch (see releaseLocks), which hands each name off to its queue;
// queued leases one by one (see byKind), each followed by the step of its
// queue.
func (d *Driver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	for _, r := range reqs {
		if err := checkLease(r.Kind, r.ID); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	res, err := byKind(ctx, d, reqs, func(r driver.ReleaseRequest) driver.Kind { return r.Kind }, d.releaseLocks, d.releaseQueued)
	d.noteSilence(ctx, start, err)
	return res, err
}

// releaseQueued releases one reader, permit or waiter's place. A waiter
// granted meanwhile releases the lease it was granted (the grant raced the
// cancellation). A release marker per id tells a retry (AlreadyReleased)
// from a lease that was lost (NotHeld).
func (d *Driver) releaseQueued(ctx context.Context, r driver.ReleaseRequest) (driver.ReleaseResult, error) {
	var read *clientv3.TxnResponse // releaseHolder's, for the first round
	if r.Kind == driver.KindWaiter {
		d.expiry.gone(r.Key, r.ID)
	} else {
		res, resp, err := d.releaseHolder(ctx, r)
		if err != nil || res != 0 {
			return res, err
		}
		read = resp
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		resp := read
		if read != nil {
			read = nil
		} else {
			var err error
			if resp, err = d.cli.Txn(ctx).Then(d.releaseReads(r)...).Commit(); err != nil {
				return 0, err
			}
		}
		get := func(i int) []byte {
			if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) == 1 {
				return kvs[0].Value
			}
			return nil
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			if r.Kind != driver.KindWaiter {
				if v, err := decodeQueueValue(kvs[0].Value); err != nil || v.Mode.HolderKind() != r.Kind {
					return driver.NotHeld, nil
				}
			}
			done, err := d.deleteQueued(ctx, r, string(kvs[0].Key), kvs[0].ModRevision)
			if err != nil {
				return 0, err
			}
			if !done {
				continue // changed meanwhile (granted, expired): look again
			}
			if _, err := d.settle(ctx, r.Key, ""); err != nil {
				return 0, err
			}
			return driver.Released, nil
		}
		if r.Kind == driver.KindWaiter {
			// Granted meanwhile? Release what it was granted, for the next.
			if lock := get(2); lock != nil && ownedBy(lock, r.ID) {
				res, err := d.releaseLocks(ctx, []driver.ReleaseRequest{{Key: r.Key, ID: r.ID}})
				if err != nil {
					return 0, err
				}
				return res[0], nil
			}
			if h := get(4); h != nil {
				if v, err := decodeQueueValue(h); err == nil {
					r.Kind = v.Mode.HolderKind()
					continue
				}
			}
			if m := get(3); string(m) == r.ID {
				return driver.AlreadyReleased, nil
			}
		}
		if m := get(1); string(m) == r.ID {
			return driver.AlreadyReleased, nil
		}
		return driver.NotHeld, nil
	}
	return 0, errQueueContended
}

// releaseReads are what releaseQueued reads of a release: the request's
// own key (its place or its holder key), its queued release marker, the
// lock key, its exclusive release marker and its holder key.
func (d *Driver) releaseReads(r driver.ReleaseRequest) []clientv3.Op {
	own := d.holderKey(r.Key, r.ID)
	if r.Kind == driver.KindWaiter {
		own = d.waiterKey(r.Key, r.ID)
	}
	return []clientv3.Op{
		clientv3.OpGet(own),
		clientv3.OpGet(d.qmarkKey(r.Key, r.ID)),
		clientv3.OpGet(d.lockKey(r.Key)),
		clientv3.OpGet(d.markerKey(r.Key, r.ID)),
		clientv3.OpGet(d.holderKey(r.Key, r.ID)),
	}
}

// releaseHolder releases a reader's or permit holder's lease in one Txn
// when its holder key is the id's, of the request's kind: delete it,
// write the id's release marker in the same revision (which tells the
// expiry watches it from an expiry) and read the name, from which the
// hand-off to its waiters, if it has any, starts. So an uncontended
// RLock or permit cycle is two requests. Otherwise the Txn makes
// releaseQueued's reads, returned as read, and res is 0.
func (d *Driver) releaseHolder(ctx context.Context, r driver.ReleaseRequest) (res driver.ReleaseResult, read *clientv3.TxnResponse, err error) {
	mode := driver.ModeShared
	if r.Kind == driver.KindPermit {
		mode = driver.ModePermit
	}
	key := d.holderKey(r.Key, r.ID)
	for attempt := 0; ; attempt++ {
		// Not without the marker, for the reason releaseRound gives.
		marker, err := d.markers.get(ctx)
		if err != nil {
			return 0, nil, fmt.Errorf("release marker lease: %w", err)
		}
		then := append([]clientv3.Op{clientv3.OpDelete(key),
			clientv3.OpPut(d.qmarkKey(r.Key, r.ID), r.ID, clientv3.WithLease(marker))}, d.queueReads(r.Key)...)
		resp, err := d.cli.Txn(ctx).If(holderCmp(key, r.ID, mode)...).Then(then...).Else(d.releaseReads(r)...).Commit()
		if err != nil && attempt == 0 && isLeaseNotFound(err) {
			d.markers.forget(marker)
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if !resp.Succeeded {
			return 0, resp, nil
		}
		st, err := d.queueStateOf(r.Key, resp.Header.Revision, resp.Responses[2].GetResponseRange().Kvs,
			resp.Responses[3].GetResponseRange().Kvs)
		if err == nil && len(st.waiters) > 0 {
			err = d.handOff(ctx, []queueOf{{r.Key, st}})
		}
		if err != nil {
			return 0, nil, err
		}
		return driver.Released, nil, nil
	}
}

// deleteQueued deletes key if unchanged since modRev, writing the id's
// release marker with it.
func (d *Driver) deleteQueued(ctx context.Context, r driver.ReleaseRequest, key string, modRev int64) (bool, error) {
	for attempt := 0; ; attempt++ {
		// Not without the marker, for the reason releaseRound gives.
		marker, err := d.markers.get(ctx)
		if err != nil {
			return false, fmt.Errorf("release marker lease: %w", err)
		}
		ops := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpPut(d.qmarkKey(r.Key, r.ID), r.ID, clientv3.WithLease(marker))}
		resp, err := d.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(ops...).Commit()
		if err != nil && attempt == 0 && isLeaseNotFound(err) {
			d.markers.forget(marker)
			continue
		}
		if err != nil {
			return false, err
		}
		return resp.Succeeded, nil
	}
}

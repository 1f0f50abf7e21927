package etcddriver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// renewLocks renews exclusive locks (KindLock) in two round trips, neither
// of which writes through Raft: one read-only Txn reads every key of the
// batch (a lock whose key is gone or belongs to another id is not held),
// then one LeaseKeepAliveOnce per distinct lease among the held keys goes
// out, all at once. The engine's validity deadline counts from before this
// call, so from before the keep-alives were sent. The caller has checked
// the requests.
//
// A renewal asking for another TTL than the lock was taken with (the
// engine never does; the conformance suite does) moves the key to the
// pool's lease for the new TTL, in a Txn conditional on the value being
// unchanged; the create revision, so the token, stays.
func (d *Driver) renewLocks(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	held := make([]bool, len(reqs))
	if len(reqs) == 0 {
		return held, nil
	}
	ttls := make([]int64, len(reqs))
	for i, r := range reqs {
		ttl, err := ttlSeconds(r.TTL)
		if err != nil {
			return nil, err
		}
		ttls[i] = ttl
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	owned, err := d.readOwned(ctx, reqs)
	if err != nil {
		return nil, err
	}

	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for id, idx := range owned.byLease {
		wg.Go(func() {
			ok, err := d.leases.keepAlive(ctx, id, ttls[idx[0]])
			if err != nil {
				fail(err)
				return
			}
			for _, i := range idx {
				held[i] = ok
			}
		})
	}
	if len(owned.moves) > 0 {
		wg.Go(func() {
			if err := d.move(ctx, reqs, ttls, owned.values, owned.moves, held); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return held, nil
}

// ownedLocks is what readOwned found of a batch of renewals, by request
// index: the locks still owned by their request's id, to keep alive by
// lease or, asking for another TTL, to move to another lease.
type ownedLocks struct {
	byLease map[clientv3.LeaseID][]int // owned, with the TTL they were taken with
	moves   []int                      // owned, asking for another TTL
	values  [][]byte                   // the owned locks' values as read
}

// readOwned reads the lock keys of reqs in one read-only Txn and sorts
// the ones still owned by their request's id.
func (d *Driver) readOwned(ctx context.Context, reqs []driver.RenewRequest) (ownedLocks, error) {
	ops := make([]clientv3.Op, len(reqs))
	for i, r := range reqs {
		ops[i] = clientv3.OpGet(d.lockKey(r.Key))
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return ownedLocks{}, err
	}
	o := ownedLocks{byLease: make(map[clientv3.LeaseID][]int), values: make([][]byte, len(reqs))}
	for i, r := range reqs {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) != 1 || !ownedBy(kvs[0].Value, r.ID) {
			continue
		}
		o.values[i] = kvs[0].Value
		v, err := decodeValue(kvs[0].Value)
		if err == nil && v.ttl != r.TTL {
			o.moves = append(o.moves, i)
			continue
		}
		id := clientv3.LeaseID(kvs[0].Lease)
		o.byLease[id] = append(o.byLease[id], i)
	}
	return o, nil
}

// move re-attaches the keys of reqs[moves] to the pool's lease for their
// new TTL, with their value's TTL field updated: one Txn of nested Txns,
// each conditional on the key's value being the one just read, sent with
// a keep-alive of the new lease where Acquire would send one.
func (d *Driver) move(ctx context.Context, reqs []driver.RenewRequest, ttls []int64, values [][]byte, moves []int, held []bool) error {
	start := time.Now()
	byTTL := make(map[int64][]int)
	for _, i := range moves {
		byTTL[ttls[i]] = append(byTTL[ttls[i]], i)
	}
	for ttl, idx := range byTTL {
		l, err := d.leases.get(ctx, ttl)
		if err != nil {
			return err
		}
		ops := make([]clientv3.Op, len(idx))
		for j, i := range idx {
			v, err := decodeValue(values[i])
			if err != nil {
				return err
			}
			v.ttl = reqs[i].TTL
			nv, err := v.encode()
			if err != nil {
				return err
			}
			key := d.lockKey(reqs[i].Key)
			ops[j] = clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", string(values[i]))},
				[]clientv3.Op{clientv3.OpPut(key, nv, clientv3.WithLease(l.id))}, nil)
		}
		wait := d.leases.freshen(ctx, l, start)
		resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
		kaErr := wait()
		if err == nil && !errors.Is(kaErr, errLeaseLost) {
			err = kaErr
		}
		if err != nil {
			return err
		}
		for j, i := range idx {
			held[i] = kaErr == nil && resp.Responses[j].GetResponseTxn().Succeeded
		}
	}
	return nil
}

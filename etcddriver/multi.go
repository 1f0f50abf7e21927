package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.MultiAcquirer = (*Driver)(nil)

// MaxAtomic is the most locks one AcquireAll takes: its Txn compares two
// things per key (the lock key is absent, the name has no waiter or queued
// holder), and etcd refuses more than 128 compares in one Txn by default.
const MaxAtomic = 64

// Atomic implements driver.MultiAcquirer: one etcd Txn can take any keys,
// up to MaxAtomic of them (etcd's limit on operations per Txn).
func (d *Driver) Atomic(keys []string) bool { return len(keys) > 0 && len(keys) <= MaxAtomic }

// AcquireAll implements driver.MultiAcquirer: one Txn, "if every key is
// absent, put them all, each on the pool's lease for its TTL; else read
// them", sent together with a keep-alive of each lease where Acquire
// would send one. Every lock's token is the revision of that Txn: one value for
// the whole set, above every earlier token of each key.
func (d *Driver) AcquireAll(ctx context.Context, reqs []driver.AcquireRequest) (driver.AcquireAllResult, error) {
	if !d.Atomic(reqs2keys(reqs)) {
		return driver.AcquireAllResult{}, fmt.Errorf("%w: AcquireAll of %d locks (1 to %d)", driver.ErrInvalid, len(reqs), MaxAtomic)
	}
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if seen[r.Key] {
			return driver.AcquireAllResult{}, fmt.Errorf("%w: AcquireAll names %q twice", driver.ErrInvalid, r.Key)
		}
		seen[r.Key] = true
		if err := checkID(r.ID); err != nil {
			return driver.AcquireAllResult{}, err
		}
		if _, err := ttlSeconds(r.TTL); err != nil {
			return driver.AcquireAllResult{}, err
		}
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		res, retry, err := d.acquireAllOnce(ctx, start, reqs)
		if (retry || errors.Is(err, rpctypes.ErrLeaseNotFound)) && attempt == 0 {
			continue
		}
		if retry {
			// Our leftovers again (a racing retry of the same IDs): busy,
			// try again at once.
			return driver.AcquireAllResult{Busy: 0, RetryAfter: 0}, nil
		}
		return res, err
	}
}

func reqs2keys(reqs []driver.AcquireRequest) []string {
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		keys[i] = r.Key
	}
	return keys
}

// acquireAllOnce makes one attempt; retry reports that it found (and
// freed) the remains of an earlier grant of the same IDs with nobody else
// in the way, so a second attempt should succeed.
func (d *Driver) acquireAllOnce(ctx context.Context, start time.Time, reqs []driver.AcquireRequest) (driver.AcquireAllResult, bool, error) {
	leases := make(map[int64]*poolLease)
	var cmps []clientv3.Cmp
	var puts, gets []clientv3.Op
	for _, r := range reqs {
		ttl, _ := ttlSeconds(r.TTL)
		l := leases[ttl]
		if l == nil {
			var err error
			if l, err = d.leases.get(ctx, ttl); err != nil {
				return driver.AcquireAllResult{}, false, err
			}
			leases[ttl] = l
		}
		value, err := lockValue{id: r.ID, ttl: r.TTL, since: start, owner: r.Owner}.encode()
		if err != nil {
			return driver.AcquireAllResult{}, false, err
		}
		key := d.lockKey(r.Key)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0), d.queueEmptyCmp(r.Key))
		puts = append(puts, clientv3.OpPut(key, value, clientv3.WithLease(l.id)))
		gets = append(gets, clientv3.OpGet(key), clientv3.OpGet(d.queuePrefix(r.Key), clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	waits := make([]func() error, 0, len(leases))
	for _, l := range leases {
		waits = append(waits, d.leases.freshen(ctx, l, start))
	}
	resp, err := d.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	var kaErr error
	for _, wait := range waits {
		kaErr = errors.Join(kaErr, wait())
	}
	if err != nil {
		return driver.AcquireAllResult{}, false, err
	}
	if resp.Succeeded {
		if kaErr != nil {
			return driver.AcquireAllResult{}, false, kaErr // the engine releases what was put
		}
		tokens := make([]uint64, len(reqs))
		for i := range tokens {
			tokens[i] = uint64(resp.Header.Revision)
		}
		return driver.AcquireAllResult{Acquired: true, Tokens: tokens}, false, nil
	}
	return d.acquireAllBusy(ctx, reqs, resp)
}

// acquireAllBusy reads the Else branch of a refused AcquireAll: all ours
// is a retry after a lost reply (held again once each lease is kept alive
// from now); ours in part is an earlier grant partly gone, whose rest is
// freed; otherwise it names a lock another owner holds.
func (d *Driver) acquireAllBusy(ctx context.Context, reqs []driver.AcquireRequest, resp *clientv3.TxnResponse) (driver.AcquireAllResult, bool, error) {
	res := driver.AcquireAllResult{Busy: -1, RetryAfter: -1}
	tokens := make([]uint64, len(reqs))
	var mine []driver.ReleaseRequest
	kept := make(map[clientv3.LeaseID]int64)
	for i, r := range reqs {
		kvs := resp.Responses[2*i].GetResponseRange().Kvs
		queuedHere := resp.Responses[2*i+1].GetResponseRange().Count > 0
		switch {
		case len(kvs) == 0 && queuedHere:
			// Waiters or readers: never jumped, whoever holds the lock.
			if res.Busy < 0 {
				res.Busy = i
			}
		case len(kvs) == 0:
		case ownedBy(kvs[0].Value, r.ID):
			mine = append(mine, driver.ReleaseRequest{Key: r.Key, ID: r.ID})
			tokens[i] = uint64(kvs[0].CreateRevision)
			ttl, _ := ttlSeconds(r.TTL)
			kept[clientv3.LeaseID(kvs[0].Lease)] = ttl
		case res.Busy < 0:
			res.Busy = i
			if v, err := decodeValue(kvs[0].Value); err == nil && v.ttl > 0 {
				res.RetryAfter = v.ttl
			}
		}
	}
	if len(mine) == len(reqs) {
		for id, ttl := range kept {
			ok, err := d.leases.keepAlive(ctx, id, ttl)
			if err != nil {
				return driver.AcquireAllResult{}, false, err
			}
			if !ok {
				return driver.AcquireAllResult{}, false, errLeaseLost
			}
		}
		return driver.AcquireAllResult{Acquired: true, Tokens: tokens}, false, nil
	}
	if len(mine) > 0 {
		// All or none: the rest of an earlier grant must not stay held.
		if _, err := d.Release(ctx, mine); err != nil {
			return driver.AcquireAllResult{}, false, err
		}
	}
	if res.Busy < 0 {
		// Nobody else holds any of them: what blocked us was our own
		// leftover, now freed.
		return driver.AcquireAllResult{}, true, nil
	}
	return res, false, nil
}

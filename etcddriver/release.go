package etcddriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockio/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// releaseLocks releases exclusive locks (KindLock). Each request is a
// nested Txn: if the key's value belongs to the request's id, delete it and
// write the release marker; else read the marker, which tells a retry of our own release
// (AlreadyReleased) from a lock that was lost (NotHeld). All of a batch's
// requests go in one outer Txn — one Raft entry — except that a key
// appearing twice goes in a later Txn (etcd refuses a Txn writing one key
// twice). The callers have checked the requests.
func (d *Driver) releaseLocks(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	results := make([]driver.ReleaseResult, len(reqs))
	if len(reqs) == 0 {
		return results, nil
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	for rest := indexes(len(reqs)); len(rest) > 0; {
		var round []int
		round, rest = distinctKeys(reqs, rest)
		if err := d.releaseRound(ctx, reqs, round, results); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func (d *Driver) releaseRound(ctx context.Context, reqs []driver.ReleaseRequest, round []int, results []driver.ReleaseResult) error {
	for attempt := 0; ; attempt++ {
		// No release goes without its marker: if its reply were lost, the
		// retry would find neither the lock nor the marker and answer
		// NotHeld for a lock that was ours until this release took it.
		// When etcd grants no lease (its NOSPACE alarm) it takes no lock
		// either, so a lock left to expire costs nobody a wait.
		marker, err := d.markers.get(ctx)
		if err != nil {
			return fmt.Errorf("release marker lease: %w", err)
		}
		ops := make([]clientv3.Op, len(round))
		for j, i := range round {
			r := reqs[i]
			key, mkey := d.lockKey(r.Key), d.markerKey(r.Key, r.ID)
			then := []clientv3.Op{
				clientv3.OpDelete(key),
				clientv3.OpPut(mkey, r.ID, clientv3.WithLease(marker)),
				// Last: does the name have waiters to hand off to?
				clientv3.OpGet(d.waiterPrefix(r.Key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
			}
			ops[j] = clientv3.OpTxn(ownedCmp(key, r.ID), then, []clientv3.Op{clientv3.OpGet(mkey)})
		}
		resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The marker lease is gone (revoked by hand, or a clock jump):
			// grant another.
			d.markers.forget(marker)
			continue
		}
		if err != nil {
			return err
		}
		var handOff []string
		for j, i := range round {
			inner := resp.Responses[j].GetResponseTxn()
			switch {
			case inner.Succeeded:
				results[i] = driver.Released
				if inner.Responses[len(inner.Responses)-1].GetResponseRange().Count > 0 {
					handOff = append(handOff, reqs[i].Key)
				}
			case releasedBy(inner, reqs[i].ID):
				results[i] = driver.AlreadyReleased
			default:
				results[i] = driver.NotHeld
			}
		}
		// The hand-off: the next step of each queue grants its heads.
		// Nobody can take the name meanwhile: Acquire refuses a name with
		// waiters, and every Enqueue settles the queue first.
		for _, name := range handOff {
			if _, err := d.settle(ctx, name, ""); err != nil {
				return err
			}
		}
		return nil
	}
}

// releasedBy reports whether the marker read by a failed release names id.
func releasedBy(inner *pb.TxnResponse, id string) bool {
	if len(inner.Responses) == 0 {
		return false
	}
	kvs := inner.Responses[0].GetResponseRange().Kvs
	return len(kvs) == 1 && string(kvs[0].Value) == id
}

func indexes(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// distinctKeys splits idx into the first occurrence of each key and the
// rest, in order.
func distinctKeys(reqs []driver.ReleaseRequest, idx []int) (round, rest []int) {
	seen := make(map[string]bool, len(idx))
	for _, i := range idx {
		if seen[reqs[i].Key] {
			rest = append(rest, i)
			continue
		}
		seen[reqs[i].Key] = true
		round = append(round, i)
	}
	return round, rest
}

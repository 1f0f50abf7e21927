package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// releaseLocks releases exclusive locks (KindLock). Each request is a
// nested Txn: if the key's value belongs to the request's id, delete it,
// write the release marker and read the name's queue range (waiters to
// hand off to); else read the marker, which tells a retry of our own
// release (AlreadyReleased) from a lock that was lost (NotHeld). All of a batch's
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
		inners, rev, err := d.releaseTxn(ctx, reqs, round, marker)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The marker lease is gone (revoked by hand, or a clock jump):
			// grant another.
			d.markers.forget(marker)
			continue
		}
		if err != nil {
			return err
		}
		var handOff []queueOf
		for j, i := range round {
			inner := inners[j]
			switch {
			case inner.Succeeded:
				results[i] = driver.Released
				queue := inner.Responses[len(inner.Responses)-1].GetResponseRange().Kvs
				st, err := d.queueStateOf(reqs[i].Key, rev, nil, queue)
				if err != nil {
					return err
				}
				if len(st.waiters) > 0 {
					handOff = append(handOff, queueOf{reqs[i].Key, st})
				}
			case releasedBy(inner, reqs[i].ID):
				results[i] = driver.AlreadyReleased
			default:
				results[i] = driver.NotHeld
			}
		}
		return d.handOff(ctx, handOff)
	}
}

// releaseTxn sends the release Txn of reqs[round] with markers on lease
// marker, and returns the answer to each request and the revision. A
// release of one lock is a Txn of its own; several are nested Txns in one.
func (d *Driver) releaseTxn(ctx context.Context, reqs []driver.ReleaseRequest, round []int, marker clientv3.LeaseID) ([]*pb.TxnResponse, int64, error) {
	type branches struct {
		cmps      []clientv3.Cmp
		then, els []clientv3.Op
	}
	txns := make([]branches, len(round))
	for j, i := range round {
		r := reqs[i]
		key, mkey := d.lockKey(r.Key), d.markerKey(r.Key, r.ID)
		txns[j] = branches{ownedCmp(key, r.ID), []clientv3.Op{
			clientv3.OpDelete(key),
			clientv3.OpPut(mkey, r.ID, clientv3.WithLease(marker)),
			// Last: the queue as the hand-off starts from it.
			clientv3.OpGet(d.queuePrefix(r.Key), clientv3.WithPrefix()),
		}, []clientv3.Op{clientv3.OpGet(mkey)}}
	}
	if len(txns) == 1 {
		resp, err := d.cli.Txn(ctx).If(txns[0].cmps...).Then(txns[0].then...).Else(txns[0].els...).Commit()
		if err != nil {
			return nil, 0, err
		}
		return []*pb.TxnResponse{(*pb.TxnResponse)(resp)}, resp.Header.Revision, nil
	}
	ops := make([]clientv3.Op, len(txns))
	for j, b := range txns {
		ops[j] = clientv3.OpTxn(b.cmps, b.then, b.els)
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, err
	}
	inners := make([]*pb.TxnResponse, len(round))
	for j := range inners {
		inners[j] = resp.Responses[j].GetResponseTxn()
	}
	return inners, resp.Header.Revision, nil
}

// queueOf is a name's queue as a release read it.
type queueOf struct {
	name string
	st   queueState
}

// handOff takes the next step of each queue a release left with waiters,
// which grants its heads, starting from the queue as the release read it:
// a hand-off is one Txn more than the release, not a read and a Txn.
// Nobody can take the name meanwhile: Acquire refuses a name with
// waiters, and an Enqueue grants at once only a name with no waiter (else
// it queues behind them, or reads and takes a step that grants the heads
// first).
func (d *Driver) handOff(ctx context.Context, queues []queueOf) error {
	for _, q := range queues {
		if _, err := d.stepFrom(ctx, time.Now(), q.name, nil, "", &q.st); err != nil {
			return err
		}
	}
	return nil
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

package etcddriver

import (
	"context"

	"github.com/dlockio/dlock/driver"
)

// byKind answers a Renew or Release batch the way etcd stores its leases:
// the exclusive locks (KindLock, plain or granted by the queue: the same
// key) all together in one call of locks, then every queued lease (a
// waiter's place, a reader's share, a permit) in order with one call of
// queued each, under a call context of their own. A call whose group is
// empty is not made. answers[i] answers reqs[i].
func byKind[Req, Ans any](ctx context.Context, d *Driver, reqs []Req, kind func(Req) driver.Kind,
	locks func(context.Context, []Req) ([]Ans, error),
	queued func(context.Context, Req) (Ans, error)) ([]Ans, error) {
	var lockReqs []Req
	var lockIdx, queuedIdx []int
	for i, r := range reqs {
		if kind(r) == driver.KindLock {
			lockReqs, lockIdx = append(lockReqs, r), append(lockIdx, i)
		} else {
			queuedIdx = append(queuedIdx, i)
		}
	}
	answers := make([]Ans, len(reqs))
	if len(lockReqs) > 0 {
		got, err := locks(ctx, lockReqs)
		if err != nil {
			return nil, err
		}
		for j, i := range lockIdx {
			answers[i] = got[j]
		}
	}
	if len(queuedIdx) == 0 {
		return answers, nil
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	for _, i := range queuedIdx {
		a, err := queued(ctx, reqs[i])
		if err != nil {
			return nil, err
		}
		answers[i] = a
	}
	return answers, nil
}

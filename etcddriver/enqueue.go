package etcddriver

import (
	"context"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// enqueueOnce is the first request of an Enqueue: one Txn that serves the
// common cases alone.
//
//   - A free name (no lock key, nothing in its queue range) is granted to
//     req, so that an uncontended queued acquisition costs what a plain
//     one does.
//   - Otherwise a waiting request is queued as a waiter at once, unless
//     its id already holds or waits (then the Txn only reads); a reader
//     only behind an exclusive holder, since it fits beside other
//     readers. Queueing needs nothing else: nobody can be granted by this
//     step (the name is not free), and someone has a hand-off to make — the exclusive
//     holder or the last shared holder, whose release reads the queue in
//     the Txn that frees the name, or, when the name is between holders,
//     the releaser whose hand-off to the waiters ahead is under way (or,
//     if that releaser died or the holder expired, the expiry watch of
//     the head's Driver, and when that Driver is gone too, the one of the
//     next waiter's, see chain.go). Conditions on what was read
//     would make such a step conflict with every hand-off in between,
//     which under contention is every cycle. A permit request or one with
//     a queue cap goes the read-and-check way: its limit and its cap are
//     checked against the waiters. That Else is as large as the rest of
//     the Txn, and every Txn is written to etcd's log whichever branch
//     runs, so it is sent only for a name this Driver found busy within
//     busyMemory (see busyNames): on a quiet name, the first waiter's
//     Enqueue finds it busy and sends this Txn again, offering to queue.
//
// recent says whether the name was found busy lately. The grant or place
// is on the pool's lease, kept alive as Acquire keeps it. In every other case the Txn reads the name, and read is what it
// read, for the step that follows; read is nil when the step is to read
// again (the pool's lease was gone).
func (d *Driver) enqueueOnce(ctx context.Context, start time.Time, name string, req driver.QueueRequest, recent bool) (out stepOutcome, read *queueState, err error) {
	secs, _ := ttlSeconds(req.TTL)
	pool, err := d.leases.get(ctx, secs)
	if err != nil {
		return stepOutcome{}, nil, err
	}
	now := time.Now()
	v := queueValue{ID: req.ID, Mode: req.Mode, Limit: req.Limit, Inbox: req.Inbox, TTL: req.TTL, Since: now, Owner: req.Owner}
	grant, err := d.grantOp(name, v, now, pool.id)
	if err != nil {
		return stepOutcome{}, nil, err
	}
	busy, err := d.busyOps(name, req, v, pool.id, recent)
	if err != nil {
		return stepOutcome{}, nil, err
	}
	wait := d.leases.freshen(ctx, pool, start)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(d.lockKey(name)), "=", 0), d.queueEmptyCmp(name)).
		Then(grant).
		Else(busy...).
		Commit()
	kaErr := wait()
	if isLeaseNotFound(err) {
		d.leases.drop(pool)
		return stepOutcome{}, nil, nil
	}
	if err != nil {
		return stepOutcome{}, nil, err
	}
	rev := resp.Header.Revision
	if resp.Succeeded {
		out.res = driver.QueueResult{Granted: true, Token: uint64(rev), RetryAfter: -1}
	} else {
		d.busy.seen(name)
		var queued bool
		if read, queued, err = d.busyResult(name, rev, req, resp.Responses); err != nil || !queued {
			return stepOutcome{}, read, err
		}
		out.res = driver.QueueResult{Queued: true, RetryAfter: read.occupancy().retryAfter()}
		out.rev, out.pred = rev, stepHeads{left: read.waiters}.ahead(req.ID)
	}
	if kaErr != nil {
		// Put on a lease that may not last: the engine releases the grant
		// or place on this error.
		return stepOutcome{}, nil, kaErr
	}
	return out, nil, nil
}

// busyOps is the Else of enqueueOnce's Txn: the reads of the name, and
// for a request that may be queued so on a name found busy lately
// (recent), the nested Txns that queue it unless its id holds or waits
// already:
//
//	if id holds: read
//	else if id does not wait (and, for a reader, a writer holds): put its place, read
//	else: read
func (d *Driver) busyOps(name string, req driver.QueueRequest, v queueValue, lease clientv3.LeaseID, recent bool) ([]clientv3.Op, error) {
	reads := d.queueReads(name)
	if !recent || !req.Wait || req.Mode == driver.ModePermit || req.MaxWaiters > 0 {
		return reads, nil
	}
	val, err := v.encode()
	if err != nil {
		return nil, err
	}
	wkey := d.waiterKey(name, req.ID)
	holds := ownedCmp(d.lockKey(name), req.ID)
	waits := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(wkey), "=", 0)}
	if req.Mode == driver.ModeShared {
		// A reader fits beside readers: queued at once only behind a
		// writer.
		holds = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(d.holderKey(name, req.ID)), ">", 0)}
		waits = append(waits, clientv3.Compare(clientv3.CreateRevision(d.lockKey(name)), ">", 0))
	}
	place := clientv3.OpTxn(waits,
		append([]clientv3.Op{clientv3.OpPut(wkey, val, clientv3.WithLease(lease))}, reads...),
		reads)
	return []clientv3.Op{clientv3.OpTxn(holds, reads, []clientv3.Op{place})}, nil
}

// busyResult reads the responses of busyOps: the name as read, and
// whether req was queued.
func (d *Driver) busyResult(name string, rev int64, req driver.QueueRequest, rs []*pb.ResponseOp) (*queueState, bool, error) {
	queued := false
	if len(rs) == 1 { // the nested Txns
		holds := rs[0].GetResponseTxn()
		rs = holds.Responses
		if !holds.Succeeded {
			place := rs[0].GetResponseTxn()
			rs, queued = place.Responses, place.Succeeded
			if queued {
				rs = rs[1:] // after the put
			}
		}
	}
	st, err := d.queueStateOf(name, rev, rs[0].GetResponseRange().Kvs, rs[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, false, err
	}
	return &st, queued, nil
}

// busyMemory is how long a Driver remembers that an Enqueue found a name
// busy: as long, its Enqueues of that name offer to queue at once.
const busyMemory = time.Second

// busyNames remembers the names an Enqueue found busy lately. The zero
// value is ready.
type busyNames struct {
	mu sync.Mutex
	at map[string]time.Time
}

// seen notes that name was found busy now.
func (b *busyNames) seen(name string) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at == nil {
		b.at = make(map[string]time.Time)
	}
	if len(b.at) >= 1024 {
		for n, t := range b.at {
			if now.Sub(t) >= busyMemory {
				delete(b.at, n)
			}
		}
	}
	b.at[name] = now
}

// recently reports whether name was found busy within busyMemory.
func (b *busyNames) recently(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.at[name]
	return ok && time.Since(t) < busyMemory
}

// queuesAtOnce reports whether enqueueOnce, offering to, may queue req on
// a name in state st.
func queuesAtOnce(req driver.QueueRequest, st queueState) bool {
	if !req.Wait || req.Mode == driver.ModePermit || req.MaxWaiters > 0 {
		return false
	}
	return req.Mode == driver.ModeExclusive || st.lock != nil
}

package etcddriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// errQueueContended is a queue step that lost the race to concurrent
// writers of the same name maxAttempts times in a row.
var errQueueContended = errors.New("etcddriver: queue step kept conflicting with concurrent changes")

// queued is one waiter or queued holder as read.
type queued struct {
	kv *mvccpb.KeyValue
	v  queueValue
}

// queueState is one consistent read of a name: its lock key (the
// exclusive holder), its shared/permit holders and its waiters in arrival
// order (create revision).
type queueState struct {
	rev     int64
	lock    *mvccpb.KeyValue
	holders []queued
	waiters []queued
}

func (d *Driver) readQueue(ctx context.Context, name string) (queueState, error) {
	resp, err := d.cli.Txn(ctx).Then(d.queueReads(name)...).Commit()
	if err != nil {
		return queueState{}, err
	}
	return d.queueStateOf(name, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs,
		resp.Responses[1].GetResponseRange().Kvs)
}

// queueReads are the reads of a name's state: its lock key and its queue
// range.
func (d *Driver) queueReads(name string) []clientv3.Op {
	return []clientv3.Op{clientv3.OpGet(d.lockKey(name)), clientv3.OpGet(d.queuePrefix(name), clientv3.WithPrefix())}
}

// queueStateOf is the state of name at rev from its lock key's kvs (none
// if the key is absent) and its queue range's.
func (d *Driver) queueStateOf(name string, rev int64, lock, queue []*mvccpb.KeyValue) (queueState, error) {
	st := queueState{rev: rev}
	if len(lock) == 1 {
		st.lock = lock[0]
	}
	hp, wp := d.holderPrefix(name), d.waiterPrefix(name)
	for _, kv := range queue {
		v, err := decodeQueueValue(kv.Value)
		if err != nil {
			return queueState{}, fmt.Errorf("queue of %q: %w", name, err)
		}
		switch {
		case strings.HasPrefix(string(kv.Key), hp):
			st.holders = append(st.holders, queued{kv, v})
		case strings.HasPrefix(string(kv.Key), wp):
			st.waiters = append(st.waiters, queued{kv, v})
		}
	}
	sort.Slice(st.waiters, func(i, j int) bool { return st.waiters[i].kv.CreateRevision < st.waiters[j].kv.CreateRevision })
	return st, nil
}

// occupancy counts the holders a grant must be compatible with.
type occupancy struct {
	exclusive       bool
	shared, permits int
	minTTL          time.Duration // shortest holder TTL known, 0 if none
}

func (o *occupancy) add(m driver.Mode, ttl time.Duration) {
	switch m {
	case driver.ModeExclusive:
		o.exclusive = true
	case driver.ModeShared:
		o.shared++
	case driver.ModePermit:
		o.permits++
	}
	if ttl > 0 && (o.minTTL == 0 || ttl < o.minTTL) {
		o.minTTL = ttl
	}
}

func (o occupancy) fits(m driver.Mode, limit int) bool {
	switch m {
	case driver.ModeExclusive:
		return !o.exclusive && o.shared == 0 && o.permits == 0
	case driver.ModeShared:
		return !o.exclusive && o.permits == 0
	case driver.ModePermit:
		return !o.exclusive && o.shared == 0 && o.permits < limit
	}
	return false
}

// retryAfter is QueueResult.RetryAfter for a queued request, or a refused
// one at the head: the blocking holders' TTL bounds what their leases have
// left.
func (o occupancy) retryAfter() time.Duration {
	if o.minTTL <= 0 {
		return -1
	}
	return o.minTTL
}

func (st queueState) occupancy() occupancy {
	var o occupancy
	if st.lock != nil {
		ttl := time.Duration(-1)
		if v, err := decodeValue(st.lock.Value); err == nil {
			ttl = v.ttl
		}
		o.add(driver.ModeExclusive, ttl)
	}
	for _, h := range st.holders {
		o.add(h.v.Mode, h.v.TTL)
	}
	return o
}

// stepOutcome is what one queue step found or did.
type stepOutcome struct {
	res driver.QueueResult
	// probeLease is the lease of the probed id's place if it still waits
	// after the step, else 0.
	probeLease clientv3.LeaseID
	// rev is the revision the step read the name at.
	rev int64
	// pred is the key of the waiter just ahead of req or probe, if it
	// waits after the step; "" if it is the head (see keepWaiter).
	pred string
}

// Enqueue implements driver.Queuer. Its first Txn grants req on a free
// name, or queues it on a busy one, or reads the name (see enqueueOnce);
// in the last case one more Txn grants the queue heads that fit and then
// grants, queues or refuses req, conditional on nothing read having
// changed (read again and retried if it did).
func (d *Driver) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	if _, err := checkQueueRequest(req); err != nil {
		return driver.QueueResult{}, err
	}
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	out, err := d.step(ctx, req.Key, &req, "")
	switch {
	case err != nil:
	case out.res.Queued:
		d.expiry.keepWaiter(req.Key, req.ID, out.rev, req.TTL, out.pred)
	case out.res.Granted:
		d.expiry.gone(req.Key, req.ID) // if it waited: a waiter learning of its grant
	}
	return out.res, err
}

// settle grants the queue heads of name that fit, and reports the lease of
// probe's place if probe (an id, or "") still waits afterwards.
func (d *Driver) settle(ctx context.Context, name, probe string) (clientv3.LeaseID, error) {
	out, err := d.step(ctx, name, nil, probe)
	return out.probeLease, err
}

// step is the one queue algorithm, shared by every request that touches a
// queued name: etcd has no expiry hooks, so a grant the expiry of a holder
// or waiter allows happens at the next touch.
func (d *Driver) step(ctx context.Context, name string, req *driver.QueueRequest, probe string) (stepOutcome, error) {
	start := time.Now()
	var read *queueState // what the request's first Txn read, for the first round
	if req != nil {
		recent := d.busy.recently(name)
		out, st, err := d.enqueueOnce(ctx, start, name, *req, recent)
		if !recent && err == nil && st != nil && queuesAtOnce(*req, *st) {
			// Busy now: send it again, offering to queue.
			out, st, err = d.enqueueOnce(ctx, start, name, *req, true)
		}
		if err != nil || out.res.Granted || out.res.Queued {
			return out, err
		}
		read = st
	}
	return d.stepFrom(ctx, start, name, req, probe, read)
}

// stepFrom is step's loop: it reads the name (but in a first round with
// st, already read) and takes one step (stepOnce), again while a
// conflict makes it retry.
func (d *Driver) stepFrom(ctx context.Context, start time.Time, name string, req *driver.QueueRequest, probe string, read *queueState) (stepOutcome, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var st queueState
		if read != nil {
			st, read = *read, nil
		} else {
			var err error
			if st, err = d.readQueue(ctx, name); err != nil {
				return stepOutcome{}, err
			}
		}
		if req != nil {
			if out, ok, err := d.alreadyHeld(ctx, st, *req); ok || err != nil {
				return out, err
			}
		}
		if d.revokeRunOut(ctx, st) {
			continue
		}
		out, retry, err := d.stepOnce(ctx, start, name, st, req, probe)
		if retry {
			continue
		}
		return out, err
	}
	return stepOutcome{}, errQueueContended
}

// revokeRunOut revokes the leases of st's holders that this process owns
// and knows have run out (leasePool.runOut), so that a queue step does not
// wait for etcd's late expiry of a lease whose owner already gave it up.
func (d *Driver) revokeRunOut(ctx context.Context, st queueState) bool {
	revoked := false
	if st.lock != nil {
		revoked = d.leases.runOut(ctx, clientv3.LeaseID(st.lock.Lease))
	}
	for _, h := range st.holders {
		revoked = d.leases.runOut(ctx, clientv3.LeaseID(h.kv.Lease)) || revoked
	}
	return revoked
}

// alreadyHeld answers a request whose id holds a lease of the name: a
// retry after a lost reply, or a waiter learning of its grant. The lease
// is kept alive from now.
func (d *Driver) alreadyHeld(ctx context.Context, st queueState, req driver.QueueRequest) (stepOutcome, bool, error) {
	var kv *mvccpb.KeyValue
	if st.lock != nil && ownedBy(st.lock.Value, req.ID) {
		kv = st.lock
	}
	for _, h := range st.holders {
		if h.v.ID == req.ID {
			kv = h.kv
		}
	}
	if kv == nil {
		return stepOutcome{}, false, nil
	}
	ttl, _ := ttlSeconds(req.TTL)
	ok, err := d.leases.keepAlive(ctx, clientv3.LeaseID(kv.Lease), ttl)
	if err != nil {
		return stepOutcome{}, true, err
	}
	if !ok {
		return stepOutcome{}, true, errLeaseLost
	}
	return stepOutcome{res: driver.QueueResult{Granted: true, Token: uint64(kv.CreateRevision), RetryAfter: -1}}, true, nil
}

// stepOnce makes the Txn of one step from st and sends it; retry reports
// a conflict. The Txn grants the queue heads that fit (grantHeads), then
// answers req if there is one (answer), conditional on nothing read having
// changed.
func (d *Driver) stepOnce(ctx context.Context, start time.Time, name string, st queueState, req *driver.QueueRequest, probe string) (out stepOutcome, retry bool, err error) {
	now := time.Now()
	tx := d.stepConditions(name, st)
	heads, err := d.grantHeads(ctx, name, st, req, now, &tx)
	if err != nil {
		return stepOutcome{}, false, err
	}
	a := stepAnswer{res: driver.QueueResult{RetryAfter: -1}}
	if req != nil {
		if a, retry, err = d.answer(ctx, start, name, st, *req, heads, now, &tx); retry || err != nil {
			return stepOutcome{}, retry, err
		}
	}
	if probe != "" {
		if w, ok := heads.waiting(probe); ok {
			out.probeLease = clientv3.LeaseID(w.kv.Lease)
			out.pred = heads.ahead(probe)
		}
	}
	if req != nil && a.res.Queued {
		out.pred = heads.ahead(req.ID)
	}
	if len(tx.ops) > 0 {
		rev, retry, err := d.commitStep(ctx, &tx)
		if retry || err != nil {
			return stepOutcome{}, retry, err
		}
		if a.res.Granted {
			a.res.Token = uint64(rev)
		}
	}
	if a.keep != 0 {
		ttl, _ := ttlSeconds(req.TTL)
		ok, err := d.leases.keepAlive(ctx, a.keep, ttl)
		if err != nil {
			return stepOutcome{}, false, err
		}
		if !ok {
			return stepOutcome{}, true, nil // the place expired: queue anew
		}
	}
	if a.refused != nil {
		return stepOutcome{}, false, a.refused
	}
	out.res, out.rev = a.res, st.rev
	return out, false, nil
}

// stepTxn is the Txn one queue step builds: its conditions, its writes,
// and the leases it got for them, given up if the Txn finds one gone.
type stepTxn struct {
	cmps   []clientv3.Cmp
	ops    []clientv3.Op
	marker clientv3.LeaseID // of the announcements, got once needed
	pool   *poolLease       // of the request's place or grant, if it got one
}

// stepConditions starts the Txn of a step from st: the name's lock and
// holders are as read.
func (d *Driver) stepConditions(name string, st queueState) stepTxn {
	lockMod := int64(0)
	if st.lock != nil {
		lockMod = st.lock.ModRevision
	}
	hp := d.holderPrefix(name)
	return stepTxn{cmps: []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(d.lockKey(name)), "=", lockMod),
		// No holder appeared or changed since the read (one that left only
		// makes this step grant less than it could; its leaving settles).
		clientv3.Compare(clientv3.ModRevision(hp), "<", st.rev+1).WithRange(clientv3.GetPrefixRangeEnd(hp)),
	}}
}

// stepHeads is what a step's grants leave of the queue.
type stepHeads struct {
	occ     occupancy       // the holders, those just granted included
	granted map[string]bool // the ids granted by this step
	left    []queued        // the waiters left waiting, in order
}

// ahead is the key of the waiter left waiting just ahead of id, or of the
// last one if id is not among them (it joins behind them); "" for none.
func (h stepHeads) ahead(id string) string {
	pred := ""
	for _, w := range h.left {
		if w.v.ID == id {
			return pred
		}
		pred = string(w.kv.Key)
	}
	return pred
}

// waiting finds id among the waiters left waiting.
func (h stepHeads) waiting(id string) (queued, bool) {
	for _, w := range h.left {
		if w.v.ID == id {
			return w, true
		}
	}
	return queued{}, false
}

// grantHeads adds to tx the grants of st's waiters, in order, while they
// fit, and the announcements of those grants to the waiters' inboxes (but
// to req's id, which hears of its grant in the reply).
func (d *Driver) grantHeads(ctx context.Context, name string, st queueState, req *driver.QueueRequest, now time.Time, tx *stepTxn) (stepHeads, error) {
	h := stepHeads{occ: st.occupancy(), granted: map[string]bool{}}
	head := len(st.waiters) // index of the first waiter left waiting
	for i, w := range st.waiters {
		if !h.occ.fits(w.v.Mode, w.v.Limit) {
			head = i
			break
		}
		h.occ.add(w.v.Mode, w.v.TTL)
		h.granted[w.v.ID] = true
		put, err := d.grantOp(name, w.v, now, clientv3.LeaseID(w.kv.Lease))
		if err != nil {
			return stepHeads{}, err
		}
		wkey := string(w.kv.Key)
		tx.cmps = append(tx.cmps, clientv3.Compare(clientv3.CreateRevision(wkey), "=", w.kv.CreateRevision))
		tx.ops = append(tx.ops, clientv3.OpDelete(wkey), put)
		if tx.marker == 0 && w.v.Inbox != "" {
			// Without a marker lease the announcements are left out: a
			// waiter that hears of no grant learns of it when it next asks
			// (driver.QueueResult.RetryAfter).
			tx.marker, _ = d.markers.get(ctx)
		}
		if tx.marker != 0 && w.v.Inbox != "" && (req == nil || w.v.ID != req.ID) {
			a, _ := json.Marshal(announcement{Key: name, ID: w.v.ID})
			tx.ops = append(tx.ops, clientv3.OpPut(d.inboxPrefix(w.v.Inbox)+w.v.ID, string(a), clientv3.WithLease(tx.marker)))
		}
	}
	h.left = st.waiters[head:]
	return h, nil
}

// stepAnswer is a step's answer to its request.
type stepAnswer struct {
	res     driver.QueueResult
	keep    clientv3.LeaseID // a place to keep alive after the Txn
	refused error            // req's refusal, answered once the step's grants are made
}

// answer answers req after the step's grants: granted by them, still
// waiting, or, for an id that neither holds nor waits, as answerNew
// decides.
func (d *Driver) answer(ctx context.Context, start time.Time, name string, st queueState, req driver.QueueRequest, heads stepHeads, now time.Time, tx *stepTxn) (stepAnswer, bool, error) {
	a := stepAnswer{res: driver.QueueResult{RetryAfter: -1}}
	switch w, ok := heads.waiting(req.ID); {
	case heads.granted[req.ID]:
		a.res.Granted = true // token: the Txn's revision
	case ok:
		// Every waiter pokes at RetryAfter, not only the head: one
		// behind others becomes the head by grants and departures it
		// does not hear of (driver.QueueResult.RetryAfter).
		a.res.Queued, a.keep = true, clientv3.LeaseID(w.kv.Lease)
		a.res.RetryAfter = heads.occ.retryAfter()
	default:
		return d.answerNew(ctx, start, name, st, req, heads, now, tx)
	}
	return a, false, nil
}

// answerNew answers req, of an id that neither holds nor waits: it is
// refused (refusal), granted if it fits behind no waiter, queued if it
// waits, or told when to try again.
func (d *Driver) answerNew(ctx context.Context, start time.Time, name string, st queueState, req driver.QueueRequest, heads stepHeads, now time.Time, tx *stepTxn) (stepAnswer, bool, error) {
	a := stepAnswer{res: driver.QueueResult{RetryAfter: -1}}
	fits := len(heads.left) == 0 && heads.occ.fits(req.Mode, req.Limit)
	if a.refused = st.refusal(req, fits, len(heads.left)); a.refused != nil {
		return a, false, nil
	}
	if req.Mode == driver.ModePermit || req.MaxWaiters > 0 {
		// The limit and the cap were checked against the waiters
		// read: no waiter may have joined since.
		wp := d.waiterPrefix(name)
		tx.cmps = append(tx.cmps, clientv3.Compare(clientv3.ModRevision(wp), "<", st.rev+1).WithRange(clientv3.GetPrefixRangeEnd(wp)))
	}
	if fits || req.Wait {
		pool, retry, err := d.freshPool(ctx, start, req.TTL)
		if retry || err != nil {
			return stepAnswer{}, retry, err
		}
		tx.pool = pool
	}
	v := queueValue{ID: req.ID, Mode: req.Mode, Limit: req.Limit, Inbox: req.Inbox, TTL: req.TTL, Since: now, Owner: req.Owner}
	switch {
	case fits:
		put, err := d.grantOp(name, v, now, tx.pool.id)
		if err != nil {
			return stepAnswer{}, false, err
		}
		tx.ops = append(tx.ops, put)
		a.res.Granted = true
	case req.Wait:
		val, err := v.encode()
		if err != nil {
			return stepAnswer{}, false, err
		}
		tx.ops = append(tx.ops, clientv3.OpPut(d.waiterKey(name, req.ID), val, clientv3.WithLease(tx.pool.id)))
		a.res.Queued = true
		a.res.RetryAfter = heads.occ.retryAfter()
	default:
		if len(heads.left) == 0 {
			a.res.RetryAfter = heads.occ.retryAfter()
		}
	}
	return a, false, nil
}

// freshPool returns the pool's lease for ttl, kept alive since
// keepAliveReuse before start, so that what is put on it now lasts what
// the engine counts on; retry reports that the lease is gone.
func (d *Driver) freshPool(ctx context.Context, start time.Time, ttl time.Duration) (*poolLease, bool, error) {
	secs, _ := ttlSeconds(ttl)
	pool, err := d.leases.get(ctx, secs)
	if err != nil {
		return nil, false, err
	}
	if err := d.leases.freshen(ctx, pool, start)(); err != nil {
		d.leases.drop(pool)
		if errors.Is(err, errLeaseLost) {
			return nil, true, nil
		}
		return nil, false, err
	}
	return pool, false, nil
}

// commitStep sends tx and returns the revision it wrote at; retry reports
// that something the step read has changed, or that a lease it used is
// gone: the step reads the name again.
func (d *Driver) commitStep(ctx context.Context, tx *stepTxn) (rev int64, retry bool, err error) {
	resp, err := d.cli.Txn(ctx).If(tx.cmps...).Then(tx.ops...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// A place's lease expired after the read, or ours or the
		// marker's vanished: read again.
		if tx.marker != 0 {
			d.markers.forget(tx.marker)
		}
		if tx.pool != nil {
			d.leases.drop(tx.pool)
		}
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	if !resp.Succeeded {
		return 0, true, nil
	}
	return resp.Header.Revision, false, nil
}

// refusal is the error that refuses req, a request of an id that neither
// holds nor waits, given whether it fits now and how many waiters are left
// after this step's grants; nil if it may be served. A permit request is
// refused if its Limit is not the one of the name's permit holders and
// waiters (driver.QueueRequest.Limit), a waiting one that cannot be
// granted if the queue has MaxWaiters already.
func (st queueState) refusal(req driver.QueueRequest, fits bool, waiters int) error {
	if req.Mode == driver.ModePermit {
		for _, qs := range [][]queued{st.holders, st.waiters} {
			for _, q := range qs {
				if q.v.Mode == driver.ModePermit && q.v.Limit != req.Limit {
					return fmt.Errorf("%w: etcddriver: %d permits asked of %q, whose holders and waiters have %d",
						driver.ErrLimitMismatch, req.Limit, req.Key, q.v.Limit)
				}
			}
		}
	}
	if req.Wait && !fits && req.MaxWaiters > 0 && waiters >= req.MaxWaiters {
		return fmt.Errorf("%w: etcddriver: %q has %d waiters", driver.ErrQueueFull, req.Key, waiters)
	}
	return nil
}

// grantOp is the put that makes v a holder on lease: exclusive on the
// plain lock key, the others under the name's holder range.
func (d *Driver) grantOp(name string, v queueValue, now time.Time, lease clientv3.LeaseID) (clientv3.Op, error) {
	if v.Mode == driver.ModeExclusive {
		val, err := lockValue{id: v.ID, ttl: v.TTL, since: now, owner: v.Owner}.encode()
		if err != nil {
			return clientv3.Op{}, err
		}
		return clientv3.OpPut(d.lockKey(name), val, clientv3.WithLease(lease)), nil
	}
	v.Inbox, v.Since = "", now
	val, err := v.encode()
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(d.holderKey(name, v.ID), val, clientv3.WithLease(lease)), nil
}

package etcddriver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// handoffGrace is how long a deletion of a queued name's lock key may go
// without a new holder's put before it is taken for an expiry. A release
// that finds waiters deletes the key and then hands it off in a second
// request (the queue step), which puts it again; an expired holder's key
// is deleted by etcd and nothing follows. It is also how long the events
// of one revision (a deletion and its release marker, on two watches) may
// take to arrive.
const handoffGrace = 100 * time.Millisecond

// expiryWatches is the expiry hook etcd lacks for the fair queue. etcd
// deletes a dead holder's key when its lease expires, but runs nothing of
// ours, so on its own the head would be granted only at the next queue
// step: a waiter's poke or its place's renewal, up to TTL/3 later. A
// Driver with waiters of its own on a name watches the name's lock key,
// and a deletion that no hand-off follows within handoffGrace gets one
// queue step, which grants the head whichever Client it belongs to. A
// releaser that died between its release and its hand-off is cured the
// same way. The same holds for readers and permit holders, whose releases
// are told from expiries by the release marker each writes (see follow).
type expiryWatches struct {
	d      *Driver
	ctx    context.Context // ends every watch on Close
	cancel context.CancelFunc

	mu     sync.Mutex
	names  map[string]*expiryWatch
	closed bool
	wg     sync.WaitGroup

	steps atomic.Int64 // queue steps taken for deletions taken for expiries
}

// expiryWatch is one watched name. It lasts while a local waiter may still
// wait on the name: until is extended by every request of such a waiter
// (enqueue, poke, renewal of its place) by that request's TTL, after which
// its place would have expired anyway.
type expiryWatch struct {
	until time.Time // guarded by expiryWatches.mu
}

func newExpiryWatches(d *Driver) *expiryWatches {
	x := &expiryWatches{d: d, names: make(map[string]*expiryWatch)}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	return x
}

// keep makes sure name is watched for ttl from now, from revision rev+1 on
// if a new watch starts (rev: the revision a queue step read, so that a
// deletion after that read is not missed).
func (x *expiryWatches) keep(name string, rev int64, ttl time.Duration) {
	until := time.Now().Add(ttl)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	if w := x.names[name]; w != nil {
		if until.After(w.until) {
			w.until = until
		}
		return
	}
	w := &expiryWatch{until: until}
	x.names[name] = w
	x.wg.Add(1)
	go x.follow(name, w, rev)
}

// follow watches name until the watch lapses, etcd ends it or the driver
// closes. A watch etcd ends is not made again: the waiters' own pokes and
// renewals still grant, and their next request restarts it.
//
// Three watches tell an expiry from a release, with no request of their
// own: the lock key (a release that hands off puts it again), the name's
// reader and permit holder keys, and the name's release markers (a
// holder's release writes its marker in the same revision as it deletes
// its key; an expiry deletes the key alone).
func (x *expiryWatches) follow(name string, w *expiryWatch, rev int64) {
	defer x.wg.Done()
	defer func() {
		x.mu.Lock()
		if x.names[name] == w {
			delete(x.names, name)
		}
		x.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(x.ctx))
	defer cancel()
	from := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		return opts
	}
	lockEvents := x.d.cli.Watch(ctx, x.d.lockKey(name), from()...)
	holderEvents := x.d.cli.Watch(ctx, x.d.holderPrefix(name), from(clientv3.WithPrefix(), clientv3.WithFilterPut())...)
	markerEvents := x.d.cli.Watch(ctx, x.d.qmarkPrefix(name), from(clientv3.WithPrefix(), clientv3.WithFilterDelete())...)
	// What the next grace timeout decides on: the lock key deleted with no
	// put since, and holder deletions (by revision) with no release marker
	// of the same revision. Both orders of a revision's events are
	// handled: its marker may come before or after its deletion.
	lockGone := false
	holderGone, marked := map[int64]bool{}, map[int64]bool{}
	grace := time.NewTimer(time.Hour)
	grace.Stop()
	defer grace.Stop()
	lapse := time.NewTimer(x.left(w))
	defer lapse.Stop()
	for {
		select {
		case resp, ok := <-lockEvents:
			if !ok || resp.Canceled || resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				if lockGone = ev.Type == mvccpb.DELETE; lockGone {
					grace.Reset(handoffGrace)
				} // else a new holder: a hand-off, or an acquisition
			}
		case resp, ok := <-holderEvents:
			if !ok || resp.Canceled || resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events { // deletes only
				if r := ev.Kv.ModRevision; !marked[r] {
					holderGone[r] = true
					grace.Reset(handoffGrace)
				}
			}
		case resp, ok := <-markerEvents:
			if !ok || resp.Canceled || resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events { // puts only
				r := ev.Kv.ModRevision
				marked[r] = true
				delete(holderGone, r)
			}
		case <-grace.C:
			if lockGone || len(holderGone) > 0 {
				x.steps.Add(1)
				sctx, scancel := context.WithTimeout(ctx, x.d.timeout)
				_, _ = x.d.settle(sctx, name, "") // failing, it leaves the grant to the waiters' own requests
				scancel()
			}
			// Every event of those revisions has come by now.
			lockGone = false
			clear(holderGone)
			clear(marked)
		case <-lapse.C:
			// Checked and dropped under one lock: a keep in between would
			// otherwise extend a watch that is about to end.
			x.mu.Lock()
			left := time.Until(w.until)
			if left <= 0 {
				delete(x.names, name)
			}
			x.mu.Unlock()
			if left <= 0 {
				return
			}
			lapse.Reset(left)
		case <-ctx.Done():
			return
		}
	}
}

func (x *expiryWatches) left(w *expiryWatch) time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	return time.Until(w.until)
}

// close ends every watch and waits for them, including a queue step in
// progress.
func (x *expiryWatches) close() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.cancel()
	x.wg.Wait()
}

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
// step: a waiter's poke or its place's renewal, up to TTL/3 later. The
// Driver of the head waiter watches the name's lock key, and a deletion
// that no hand-off follows within handoffGrace gets one queue step, which
// grants the head whichever Client it belongs to. A releaser that died
// between its release and its hand-off is cured the same way. The same
// holds for readers and permit holders, whose releases are told from
// expiries by the release marker each writes (see follow).
//
// Only the head's Driver watches the name (a head watch); the Driver of
// any other waiter watches the key of the waiter ahead of it (a behind
// watch, see chain.go), and when that key goes, its waiter may be the head
// and its Driver watches the name. So a release and its hand-off send
// events to one Driver, not to every Driver with a waiter, which under
// contention was a notification herd.
type expiryWatches struct {
	d      *Driver
	ctx    context.Context // ends every watch on Close
	cancel context.CancelFunc

	mu     sync.Mutex
	names  map[string]*expiryWatch // head watches
	behind map[waiterRef]*behindWatch
	closed bool
	wg     sync.WaitGroup

	steps atomic.Int64 // queue steps taken for deletions taken for expiries
}

// expiryWatch is one watched name. It lasts while a local waiter may still
// wait on the name: until is extended by every request of such a waiter
// (enqueue, poke, renewal of its place) by that request's TTL, after which
// its place would have expired anyway. A watch started for waiters (ids)
// ends as soon as the last of them is granted or leaves.
type expiryWatch struct {
	until time.Time       // guarded by expiryWatches.mu
	ids   map[string]bool // the waiters it is for; guarded by expiryWatches.mu
	stop  context.CancelFunc
}

func newExpiryWatches(d *Driver) *expiryWatches {
	x := &expiryWatches{d: d, names: make(map[string]*expiryWatch), behind: make(map[waiterRef]*behindWatch)}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	return x
}

// keep makes sure name is watched for ttl from now, from revision rev+1 on
// if a new watch starts (rev: the revision a queue step read, so that a
// deletion after that read is not missed).
func (x *expiryWatches) keep(name string, rev int64, ttl time.Duration) {
	x.head(name, "", rev, ttl, false)
}

// head makes sure name is watched for ttl from now, for waiter id if not
// "". A new watch starts from revision rev+1; unheld starts it as if it
// had seen the lock key deleted (see promote): a queue step follows
// unless a new holder's put comes within handoffGrace.
func (x *expiryWatches) head(name, id string, rev int64, ttl time.Duration, unheld bool) {
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
		if id != "" {
			w.ids[id] = true
		}
		return
	}
	w := &expiryWatch{until: until, ids: map[string]bool{}}
	if id != "" {
		w.ids[id] = true
	}
	ctx, stop := context.WithCancel(x.ctx)
	w.stop = stop
	x.names[name] = w
	x.wg.Add(1)
	go x.follow(ctx, name, w, rev, unheld)
}

// leaveHeadLocked ends id's part in name's head watch, and the watch with
// the last of its waiters; called with x.mu held.
func (x *expiryWatches) leaveHeadLocked(name, id string) {
	w := x.names[name]
	if w == nil || !w.ids[id] {
		return
	}
	delete(w.ids, id)
	if len(w.ids) == 0 {
		w.stop()
		delete(x.names, name)
	}
}

// follow watches name until the watch lapses, etcd ends it, its waiters
// leave (ctx) or the driver closes; unheld starts it with the grace of a
// deleted lock key (see head). A watch etcd ends is not made again: the
// waiters' own pokes and renewals still grant, and their next request
// restarts it.
//
// Three watches tell an expiry from a release, with no request of their
// own: the lock key (a release that hands off puts it again), the name's
// reader and permit holder keys, and the name's release markers (a
// holder's release writes its marker in the same revision as it deletes
// its key; an expiry deletes the key alone).
func (x *expiryWatches) follow(ctx context.Context, name string, w *expiryWatch, rev int64, unheld bool) {
	defer x.wg.Done()
	defer x.drop(name, w)
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	watches := x.watch(ctx, name, rev)
	signs := expirySigns{lockGone: unheld, holderGone: map[int64]bool{}, marked: map[int64]bool{}}
	grace := time.NewTimer(handoffGrace)
	if !unheld {
		grace.Stop()
	}
	defer grace.Stop()
	lapse := time.NewTimer(x.left(w))
	defer lapse.Stop()
	for {
		select {
		case resp, ok := <-watches.lock:
			if watchEnded(resp, ok) {
				return
			}
			signs.lockEvents(resp.Events, grace)
		case resp, ok := <-watches.holders:
			if watchEnded(resp, ok) {
				return
			}
			signs.holderDeletes(resp.Events, grace)
		case resp, ok := <-watches.markers:
			if watchEnded(resp, ok) {
				return
			}
			signs.markerPuts(resp.Events)
		case <-grace.C:
			if signs.expired() {
				x.steps.Add(1)
				sctx, scancel := context.WithTimeout(ctx, x.d.timeout)
				_, _ = x.d.settle(sctx, name, "") // failing, it leaves the grant to the waiters' own requests
				scancel()
			}
			// Every event of those revisions has come by now.
			signs.forget()
		case <-lapse.C:
			left, over := x.lapsed(name, w)
			if over {
				return
			}
			lapse.Reset(left)
		case <-ctx.Done():
			return
		}
	}
}

// nameWatches are the three watches of a name that follow reads.
type nameWatches struct {
	lock    clientv3.WatchChan // the lock key
	holders clientv3.WatchChan // deletions of reader and permit holder keys
	markers clientv3.WatchChan // puts of release markers
}

// watch opens the watches of name, from revision rev+1 on if rev is set.
func (x *expiryWatches) watch(ctx context.Context, name string, rev int64) nameWatches {
	from := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev+1))
		}
		return opts
	}
	return nameWatches{
		lock:    x.d.cli.Watch(ctx, x.d.lockKey(name), from()...),
		holders: x.d.cli.Watch(ctx, x.d.holderPrefix(name), from(clientv3.WithPrefix(), clientv3.WithFilterPut())...),
		markers: x.d.cli.Watch(ctx, x.d.qmarkPrefix(name), from(clientv3.WithPrefix(), clientv3.WithFilterDelete())...),
	}
}

// watchEnded reports whether a watch response (ok: the channel is open)
// ends the watch.
func watchEnded(resp clientv3.WatchResponse, ok bool) bool {
	return !ok || resp.Canceled || resp.Err() != nil
}

// expirySigns is what the next grace timeout decides on: the lock key
// deleted with no put since, and holder deletions (by revision) with no
// release marker of the same revision. Both orders of a revision's events
// are handled: its marker may come before or after its deletion.
type expirySigns struct {
	lockGone           bool
	holderGone, marked map[int64]bool
}

// lockEvents notes the lock key's events; a deletion starts the grace.
func (s *expirySigns) lockEvents(evs []*clientv3.Event, grace *time.Timer) {
	for _, ev := range evs {
		if s.lockGone = ev.Type == mvccpb.DELETE; s.lockGone {
			grace.Reset(handoffGrace)
		} // else a new holder: a hand-off, or an acquisition
	}
}

// holderDeletes notes deletions of holder keys; one whose revision has no
// release marker starts the grace.
func (s *expirySigns) holderDeletes(evs []*clientv3.Event, grace *time.Timer) {
	for _, ev := range evs {
		if r := ev.Kv.ModRevision; !s.marked[r] {
			s.holderGone[r] = true
			grace.Reset(handoffGrace)
		}
	}
}

// markerPuts notes release markers: the deletions of their revisions were
// releases.
func (s *expirySigns) markerPuts(evs []*clientv3.Event) {
	for _, ev := range evs {
		r := ev.Kv.ModRevision
		s.marked[r] = true
		delete(s.holderGone, r)
	}
}

// expired reports whether a deletion noted since the last forget was no
// release.
func (s *expirySigns) expired() bool { return s.lockGone || len(s.holderGone) > 0 }

// forget starts afresh, once every event of the revisions noted has come.
func (s *expirySigns) forget() {
	s.lockGone = false
	clear(s.holderGone)
	clear(s.marked)
}

// drop forgets w, the watch of name, unless a newer watch replaced it.
func (x *expiryWatches) drop(name string, w *expiryWatch) {
	x.mu.Lock()
	if x.names[name] == w {
		delete(x.names, name)
	}
	x.mu.Unlock()
}

// lapsed returns how long w, the watch of name, has left, and over once
// nothing is left, forgetting it then. Checked and dropped under one lock:
// a keep in between would otherwise extend a watch that is about to end.
func (x *expiryWatches) lapsed(name string, w *expiryWatch) (left time.Duration, over bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	left = time.Until(w.until)
	if left <= 0 {
		delete(x.names, name)
		return 0, true
	}
	return left, false
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

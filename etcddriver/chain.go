package etcddriver

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waiterRef names one waiter of this Driver.
type waiterRef struct{ name, id string }

// behindWatch follows the deletion of the key of the waiter ahead of one of
// this Driver's waiters (see expiryWatches). It lasts while its waiter may
// still wait, as a head watch does.
type behindWatch struct {
	until time.Time // guarded by expiryWatches.mu
	stop  context.CancelFunc
}

// keepWaiter is called for waiter id of name whenever a queue step
// queued it or found it waiting, at revision rev, with pred the key of
// the waiter just ahead of it then ("" for none: it is the head). The head
// gets a head watch of the name; any other waiter a behind watch of pred,
// and no part in the head watch. Both last ttl from now, extended by later
// calls.
func (x *expiryWatches) keepWaiter(name, id string, rev int64, ttl time.Duration, pred string) {
	ref := waiterRef{name, id}
	if pred == "" {
		x.mu.Lock()
		if b := x.behind[ref]; b != nil {
			b.stop()
			delete(x.behind, ref)
		}
		x.mu.Unlock()
		x.head(name, id, rev, ttl, false)
		return
	}
	until := time.Now().Add(ttl)
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	// Not the head after all (a key that went ahead of it was not the
	// head's): its Driver need not follow the name for it.
	x.leaveHeadLocked(name, id)
	if b := x.behind[ref]; b != nil {
		if until.After(b.until) {
			b.until = until
		}
		return
	}
	b := &behindWatch{until: until}
	ctx, stop := context.WithCancel(x.ctx)
	b.stop = stop
	x.behind[ref] = b
	x.wg.Add(1)
	go x.followPred(ctx, ref, b, pred, rev)
}

// gone ends every watch kept for waiter id of name: it was granted, or it
// left the queue.
func (x *expiryWatches) gone(name, id string) {
	ref := waiterRef{name, id}
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.behind[ref]; b != nil {
		b.stop()
		delete(x.behind, ref)
	}
	x.leaveHeadLocked(name, id)
}

// followPred watches the deletion of pred, from revision rev+1 on, for
// waiter ref. When pred goes (granted, left, expired) at revision r, ref's
// waiter may be the head: the name gets a head watch for it from revision
// r on, started unheld, so that a grant at r (which puts the lock key)
// is seen and anything else gets a queue step after handoffGrace. A watch
// that lapses, or that etcd ends, ends with nothing more: the waiter's
// next renewal or poke keeps it anew.
func (x *expiryWatches) followPred(ctx context.Context, ref waiterRef, b *behindWatch, pred string, rev int64) {
	defer x.wg.Done()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := x.d.cli.Watch(ctx, pred, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	lapse := time.NewTimer(x.behindLeft(b))
	defer lapse.Stop()
	for {
		select {
		case resp, ok := <-ch:
			if watchEnded(resp, ok) {
				x.dropBehind(ref, b)
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					x.promote(ref, b, ev.Kv.ModRevision)
					return
				}
			}
		case <-lapse.C:
			if left := x.behindLeft(b); left > 0 {
				lapse.Reset(left)
				continue
			}
			x.dropBehind(ref, b)
			return
		case <-ctx.Done():
			return
		}
	}
}

// promote turns b, ref's behind watch, into a part in the head watch of
// ref's name, from revision r (the deletion of the key ahead) on.
func (x *expiryWatches) promote(ref waiterRef, b *behindWatch, r int64) {
	x.mu.Lock()
	left := time.Until(b.until)
	current := x.behind[ref] == b
	if current {
		delete(x.behind, ref)
	}
	x.mu.Unlock()
	if current && left > 0 {
		x.head(ref.name, ref.id, r-1, left, true)
	}
}

func (x *expiryWatches) behindLeft(b *behindWatch) time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	return time.Until(b.until)
}

// dropBehind forgets b, ref's behind watch, unless a newer one replaced it.
func (x *expiryWatches) dropBehind(ref waiterRef, b *behindWatch) {
	x.mu.Lock()
	if x.behind[ref] == b {
		delete(x.behind, ref)
	}
	x.mu.Unlock()
}

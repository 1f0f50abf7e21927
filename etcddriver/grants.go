package etcddriver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// grantWatcher is one WatchGrants subscription: an etcd watch of the
// inbox's key range, which granting Txns write to.
type grantWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// WatchGrants implements driver.Queuer. It returns once etcd confirmed the
// watch; a watch etcd ends (no leader, compaction) is made again from the
// next revision, after rewatchDelay.
func (d *Driver) WatchGrants(ctx context.Context, inbox string, onGrant func(driver.Grant)) (driver.GrantWatcher, error) {
	if onGrant == nil {
		return nil, fmt.Errorf("%w: nil grant callback", driver.ErrInvalid)
	}
	if inbox == "" {
		return nil, fmt.Errorf("%w: empty inbox", driver.ErrInvalid)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.WithoutCancel(ctx)))
	prefix := d.inboxPrefix(inbox)
	watch := func(rev int64) clientv3.WatchChan {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify()}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return d.cli.Watch(wctx, prefix, opts...)
	}
	ch := watch(0)
	var next int64
	select {
	case resp, ok := <-ch:
		if !ok || resp.Err() != nil || !resp.Created {
			cancel()
			if ok && resp.Err() != nil {
				return nil, resp.Err()
			}
			return nil, fmt.Errorf("etcddriver: grant watch of %q not created", inbox)
		}
		next = resp.Header.Revision + 1
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	w := &grantWatcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			for resp := range ch {
				if resp.CompactRevision > next {
					// Announcements before it are gone: best effort, the
					// waiters' renewals learn of those grants.
					next = resp.CompactRevision
				}
				if resp.Header.Revision >= next {
					next = resp.Header.Revision + 1
				}
				for _, ev := range resp.Events {
					var a announcement
					if json.Unmarshal(ev.Kv.Value, &a) != nil {
						continue
					}
					// Written by the granting Txn: only a client allowed to
					// write the queue could have made it (driver.Grant).
					d.expiry.gone(a.Key, a.ID)
					onGrant(driver.Grant{Key: a.Key, ID: a.ID, Token: uint64(ev.Kv.ModRevision), Confirmed: true})
				}
			}
			select {
			case <-wctx.Done():
				return
			case <-time.After(rewatchDelay):
			}
			ch = watch(next)
		}
	}()
	return w, nil
}

// Close implements driver.GrantWatcher.
func (w *grantWatcher) Close() error {
	w.cancel()
	<-w.done
	return nil
}

// InspectQueue implements driver.Inspector: one read of the name, then one
// LeaseTimeToLive per distinct lease for the time left.
func (d *Driver) InspectQueue(ctx context.Context, key string) (driver.QueueInfo, bool, error) {
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	st, err := d.readQueue(ctx, key)
	if err != nil {
		return driver.QueueInfo{}, false, err
	}
	left, err := d.leasesLeft(ctx, st)
	if err != nil {
		return driver.QueueInfo{}, false, err
	}
	info := driver.QueueInfo{Key: key, Holders: []driver.HolderInfo{}, Waiters: []driver.WaiterInfo{}}
	if st.lock != nil {
		if t := left[clientv3.LeaseID(st.lock.Lease)]; t > 0 {
			v, err := decodeValue(st.lock.Value)
			if err != nil {
				return driver.QueueInfo{}, false, fmt.Errorf("lock %q: %w", key, err)
			}
			info.Holders = append(info.Holders, driver.HolderInfo{ID: v.id, Mode: driver.ModeExclusive,
				Token: uint64(st.lock.CreateRevision), Owner: v.owner, TTL: min(t, v.ttl)})
		}
	}
	for _, h := range st.holders {
		if t := left[clientv3.LeaseID(h.kv.Lease)]; t > 0 {
			info.Holders = append(info.Holders, driver.HolderInfo{ID: h.v.ID, Mode: h.v.Mode,
				Token: uint64(h.kv.CreateRevision), Owner: h.v.Owner, TTL: min(t, h.v.TTL)})
		}
	}
	for _, w := range st.waiters {
		if t := left[clientv3.LeaseID(w.kv.Lease)]; t > 0 {
			info.Waiters = append(info.Waiters, driver.WaiterInfo{ID: w.v.ID, Mode: w.v.Mode,
				Limit: w.v.Limit, Owner: w.v.Owner, TTL: min(t, w.v.TTL)})
		}
	}
	return info, len(info.Holders)+len(info.Waiters) > 0, nil
}

// leasesLeft asks etcd how long each distinct lease of st has left (0 for
// one gone), all at once.
func (d *Driver) leasesLeft(ctx context.Context, st queueState) (map[clientv3.LeaseID]time.Duration, error) {
	var ids []int64
	if st.lock != nil {
		ids = append(ids, st.lock.Lease)
	}
	for _, q := range append(append([]queued(nil), st.holders...), st.waiters...) {
		ids = append(ids, q.kv.Lease)
	}
	return d.leaseTTLs(ctx, ids)
}

// leaseTTLs asks etcd, one concurrent TimeToLive per distinct lease, how
// long each of ids has left: whole seconds rounded down, so a lease in its
// last second counts as 1 ms; 0 for a lease that is gone.
func (d *Driver) leaseTTLs(ctx context.Context, ids []int64) (map[clientv3.LeaseID]time.Duration, error) {
	left := make(map[clientv3.LeaseID]time.Duration, len(ids))
	var distinct []clientv3.LeaseID
	for _, id := range ids {
		if _, ok := left[clientv3.LeaseID(id)]; !ok {
			left[clientv3.LeaseID(id)] = 0
			distinct = append(distinct, clientv3.LeaseID(id))
		}
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for _, id := range distinct {
		wg.Go(func() {
			resp, err := d.cli.TimeToLive(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			if resp.TTL >= 0 {
				left[id] = max(time.Duration(resp.TTL)*time.Second, time.Millisecond)
			}
		})
	}
	wg.Wait()
	return left, firstErr
}

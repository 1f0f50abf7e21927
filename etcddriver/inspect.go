package etcddriver

import (
	"context"
	"fmt"

	"github.com/dlockio/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// listPage is how many locks List reads per range request.
const listPage = 1000

// Inspect implements driver.Inspector: a read of the key, then a
// LeaseTimeToLive of its lease for the time left.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	resp, err := d.cli.Get(ctx, d.lockKey(key))
	if err != nil {
		return driver.LockInfo{}, false, err
	}
	if len(resp.Kvs) == 0 {
		return driver.LockInfo{}, false, nil
	}
	infos, err := d.infos(ctx, resp.Kvs)
	if err != nil {
		return driver.LockInfo{}, false, err
	}
	if len(infos) == 0 { // its lease expired between the two reads
		return driver.LockInfo{}, false, nil
	}
	return infos[0], true, nil
}

// List implements driver.Inspector. The prefix is literal: etcd ranges
// compare bytes, with no pattern characters.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	from := d.lockKey(prefix)
	end := clientv3.GetPrefixRangeEnd(from)
	var out []driver.LockInfo
	rev := int64(0) // every page at the first page's revision: one consistent view
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := d.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, err
		}
		rev = resp.Header.Revision
		infos, err := d.infos(ctx, resp.Kvs)
		if err != nil {
			return nil, err
		}
		out = append(out, infos...)
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// infos turns lock keys into LockInfos, asking etcd once per distinct
// lease how long it has left. Keys whose lease is gone are left out.
func (d *Driver) infos(ctx context.Context, kvs []*mvccpb.KeyValue) ([]driver.LockInfo, error) {
	ids := make([]int64, len(kvs))
	for i, kv := range kvs {
		ids[i] = kv.Lease
	}
	left, err := d.leaseTTLs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]driver.LockInfo, 0, len(kvs))
	for _, kv := range kvs {
		ttl := left[clientv3.LeaseID(kv.Lease)]
		if ttl <= 0 {
			continue
		}
		v, err := decodeValue(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("lock %q: %w", d.nameOf(kv.Key), err)
		}
		out = append(out, driver.LockInfo{
			Key: d.nameOf(kv.Key), Token: uint64(kv.CreateRevision),
			Owner: v.owner, Since: v.since, TTL: min(ttl, v.ttl),
		})
	}
	return out, nil
}

// ForceRelease implements driver.Inspector: one delete that returns the
// deleted key, so its create revision — the broken holder's token. The
// deletion wakes watchers like a release; queued waiters are granted by
// one queue step, as after a release that finds waiters.
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	ctx, cancel := d.callCtx(ctx)
	defer cancel()
	resp, err := d.cli.Txn(ctx).Then(
		clientv3.OpDelete(d.lockKey(key), clientv3.WithPrevKV()),
		clientv3.OpGet(d.waiterPrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return 0, false, err
	}
	del := resp.Responses[0].GetResponseDeleteRange()
	if del.Deleted == 0 || len(del.PrevKvs) == 0 {
		return 0, false, nil
	}
	tok := uint64(del.PrevKvs[0].CreateRevision)
	if resp.Responses[1].GetResponseRange().Count > 0 {
		// The lock is broken whatever this step does: a failure here only
		// leaves the grant to the waiters' next renewal, so it is not the
		// caller's error.
		_, _ = d.settle(ctx, key, "")
	}
	return tok, true, nil
}

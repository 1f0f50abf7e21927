package etcddriver

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.QueueLister = (*Driver)(nil)

// ListQueues implements driver.QueueLister: every name under prefix with a
// shared or permit holder or a waiter, sorted by name, each read as
// InspectQueue reads it. Names are stored with their length first (see
// queue_keys.go), so a prefix of names is no prefix of keys: the names
// come from one keys-only read of the whole queue space, and each is then
// read on its own.
func (d *Driver) ListQueues(ctx context.Context, prefix string) ([]driver.QueueInfo, error) {
	cctx, cancel := d.callCtx(ctx)
	resp, err := d.cli.Get(cctx, d.prefix+queueSpace, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	var names []string
	for _, kv := range resp.Kvs {
		name, err := queueName(strings.TrimPrefix(string(kv.Key), d.prefix+queueSpace))
		if err != nil {
			return nil, fmt.Errorf("queue key %q: %w", kv.Key, err)
		}
		if strings.HasPrefix(name, prefix) && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	infos := []driver.QueueInfo{}
	for _, name := range names {
		info, ok, err := d.InspectQueue(ctx, name)
		if err != nil {
			return nil, err
		}
		if ok { // not emptied since the first read
			infos = append(infos, info)
		}
	}
	return infos, nil
}

package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// holderOf reads the name's live first node: its path, data and stat.
func (d *Driver) holderOf(key string) (string, nodeData, *zk.Stat, bool, error) {
	parent := d.nameNode(key)
	names, _, err := d.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nodeData{}, nil, false, nil
	}
	if err != nil {
		return "", nodeData{}, nil, false, fmt.Errorf("zkdriver: children of %s: %w", parent, err)
	}
	for _, c := range sortedChildren(names) {
		p := parent + "/" + c.name
		b, st, err := d.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return "", nodeData{}, nil, false, fmt.Errorf("zkdriver: get %s: %w", p, err)
		}
		nd, err := decodeData(b)
		if err != nil {
			continue
		}
		if c.kind != kindExclusive || time.Now().UnixMilli() > st.Mtime+nd.TTLms {
			continue
		}
		return p, nd, st, true, nil
	}
	return "", nodeData{}, nil, false, nil
}

// Inspect implements driver.Inspector.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockInfo{}, false, err
	}
	_, nd, st, ok, err := d.holderOf(key)
	if err != nil || !ok {
		return driver.LockInfo{}, false, err
	}
	return lockInfo(key, nd, st), true, nil
}

func lockInfo(key string, nd nodeData, st *zk.Stat) driver.LockInfo {
	left := time.Until(time.UnixMilli(st.Mtime + nd.TTLms))
	return driver.LockInfo{Key: key, Token: uint64(st.Czxid), Owner: nd.owner(), Since: time.Unix(0, nd.Since), TTL: max(left, 0)}
}

// InspectQueue implements driver.Inspector: the driver has no queue.
func (d *Driver) InspectQueue(context.Context, string) (driver.QueueInfo, bool, error) {
	return driver.QueueInfo{}, false, nil
}

// List implements driver.Inspector: one read of the prefix's children,
// then each name's.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	names, _, err := d.conn.Children(d.prefix)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkdriver: children of %s: %w", d.prefix, err)
	}
	var out []driver.LockInfo
	for _, seg := range names {
		key, ok := unescapeName(seg)
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, held, err := d.Inspect(ctx, key)
		if err != nil {
			return nil, err
		}
		if held {
			out = append(out, info)
		}
	}
	return out, nil
}

// ForceRelease implements driver.Inspector: it deletes the holder's node,
// which wakes the name's waiters.
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		p, _, st, ok, err := d.holderOf(key)
		if err != nil || !ok {
			return 0, false, err
		}
		switch err := d.conn.Delete(p, -1); {
		case err == nil:
			return uint64(st.Czxid), true, nil
		case errors.Is(err, zk.ErrNoNode):
			continue // released meanwhile: look again
		default:
			return 0, false, fmt.Errorf("zkdriver: delete %s: %w", p, err)
		}
	}
}

package zkdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// queued is one live node of a name, as an operator sees it.
type queued struct {
	path    string
	c       child
	mode    driver.Mode
	limit   int
	data    nodeData
	st      *zk.Stat
	granted bool
}

// readQueue reads a name's live nodes in order and marks those the grant
// rule grants: a leading exclusive node, or a leading run of shared nodes,
// or of at most limit permits. Expired nodes are left out (not deleted:
// reading is all an operator's look does).
func (d *Driver) readQueue(key string) ([]queued, error) {
	parent := d.nameNode(key)
	names, _, err := d.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkdriver: children of %s: %w", parent, err)
	}
	now := time.Now().UnixMilli()
	var out []queued
	for _, c := range sortedChildren(names) {
		m, l, ok := kindMode(c.kind)
		if !ok {
			continue
		}
		p := parent + "/" + c.name
		b, st, err := d.conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("zkdriver: get %s: %w", p, err)
		}
		nd, err := decodeData(b)
		if err != nil || now > st.Mtime+nd.TTLms {
			continue
		}
		out = append(out, queued{path: p, c: c, mode: m, limit: l, data: nd, st: st})
	}
	for i := range out {
		q := &out[i]
		switch {
		case i == 0:
			q.granted = true
		case !out[i-1].granted || out[0].mode != q.mode || q.mode == driver.ModeExclusive:
		case q.mode == driver.ModeShared || i < q.limit:
			q.granted = true
		}
	}
	return out, nil
}

func ttlLeft(q queued) time.Duration {
	return max(time.Until(time.UnixMilli(q.st.Mtime+q.data.TTLms)), 0)
}

// holderOf returns a name's exclusive holder.
func (d *Driver) holderOf(key string) (string, nodeData, *zk.Stat, bool, error) {
	qs, err := d.readQueue(key)
	if err != nil || len(qs) == 0 || qs[0].mode != driver.ModeExclusive {
		return "", nodeData{}, nil, false, err
	}
	return qs[0].path, qs[0].data, qs[0].st, true, nil
}

// InspectQueue implements driver.Inspector.
func (d *Driver) InspectQueue(ctx context.Context, key string) (driver.QueueInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return driver.QueueInfo{}, false, err
	}
	qs, err := d.readQueue(key)
	if err != nil || len(qs) == 0 {
		return driver.QueueInfo{}, false, err
	}
	info := driver.QueueInfo{Key: key}
	for _, q := range qs {
		if q.granted {
			info.Holders = append(info.Holders, driver.HolderInfo{ID: q.c.id, Mode: q.mode, Token: uint64(q.st.Czxid), Owner: q.data.owner(), TTL: ttlLeft(q)})
		} else {
			info.Waiters = append(info.Waiters, driver.WaiterInfo{ID: q.c.id, Mode: q.mode, Limit: q.limit, Owner: q.data.owner(), TTL: ttlLeft(q)})
		}
	}
	return info, true, nil
}

// ListQueues implements driver.QueueLister.
func (d *Driver) ListQueues(ctx context.Context, prefix string) ([]driver.QueueInfo, error) {
	keys, err := d.names(prefix)
	if err != nil {
		return nil, err
	}
	var out []driver.QueueInfo
	for _, key := range keys {
		info, ok, err := d.InspectQueue(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok && (len(info.Waiters) > 0 || len(info.Holders) > 1 || info.Holders[0].Mode != driver.ModeExclusive) {
			out = append(out, info)
		}
	}
	return out, nil
}

// names returns the lock names under the prefix node that start with
// prefix.
func (d *Driver) names(prefix string) ([]string, error) {
	segs, _, err := d.conn.Children(d.prefix)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zkdriver: children of %s: %w", d.prefix, err)
	}
	var keys []string
	for _, seg := range segs {
		if key, ok := unescapeName(seg); ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// Inspect implements driver.Inspector. A holder that waited was acquired
// when it was granted, which the name's node notes (nameNote): the
// release that granted it, written after the holder's node was made, or
// the grant itself, with the holder's id.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockInfo{}, false, err
	}
	p, nd, st, ok, err := d.holderOf(key)
	if err != nil || !ok {
		return driver.LockInfo{}, false, err
	}
	info := lockInfo(key, nd, st)
	b, nst, err := d.conn.Get(d.nameNode(key))
	var nt nameNote
	if err != nil || json.Unmarshal(b, &nt) != nil {
		return info, true, nil
	}
	c, _ := parseChild(p[lastSlash(p)+1:])
	switch {
	case nt.ID != "" && nt.ID == c.id:
		info.Since = time.Unix(0, nt.Since)
	case nt.Released != "" && nst.Mzxid > st.Czxid:
		// Released while the holder was waiting behind it.
		info.Since = time.Unix(0, max(nt.Since, nd.Since))
	}
	return info, true, nil
}

func lockInfo(key string, nd nodeData, st *zk.Stat) driver.LockInfo {
	left := time.Until(time.UnixMilli(st.Mtime + nd.TTLms))
	return driver.LockInfo{Key: key, Token: uint64(st.Czxid), Owner: nd.owner(), Since: time.Unix(0, nd.Since), TTL: max(left, 0)}
}

// List implements driver.Inspector: one read of the prefix's children,
// then each name's.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	keys, err := d.names(prefix)
	if err != nil {
		return nil, err
	}
	var out []driver.LockInfo
	for _, key := range keys {
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

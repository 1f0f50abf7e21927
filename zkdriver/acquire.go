package zkdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Acquire implements driver.Driver. It creates the acquisition's
// ephemeral sequential node under the name's node, then reads the name's
// children: the lock is granted when no live node is ahead of its own,
// and its token is its node's creation zxid. Expired nodes ahead (not
// modified for their TTL, by the leader's clock) are deleted on the way.
// A refused acquisition deletes its node.
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	if err := d.checkTTL(req.TTL); err != nil {
		return driver.AcquireResult{}, err
	}
	if d.isClosed() {
		return driver.AcquireResult{}, errClosed
	}
	parent := d.nameNode(req.Key)
	_, retry := d.pathOf(req.ID)
	sent := time.Now()
	nd := newData(req.TTL, sent, req.Owner)
	c, err := d.createOwn(ctx, parent, kindExclusive, req.ID, nd.encode())
	if err != nil {
		return driver.AcquireResult{}, err
	}
	v, err := d.evaluate(parent, c.path, driver.ModeExclusive, 0, c.stamp, evalOpts{token: c.token})
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if v.granted {
		d.remember(req.ID, ownNode{path: c.path, key: req.Key, kind: kindExclusive, data: nd, sent: sent, last: c.stamp, shared: v.shared})
		return driver.AcquireResult{Acquired: true, Token: v.token}, nil
	}
	if !retry || v.gone {
		d.dropOwn(req.ID, c.path)
	}
	return driver.AcquireResult{RetryAfter: v.retryAfter}, nil
}

// dropOwn deletes a node of ours that was refused. A delete whose reply is
// lost leaves the node to its TTL (see evaluate), not to the session.
func (d *Driver) dropOwn(id, path string) {
	d.forget(id, false)
	_ = d.conn.Delete(path, -1)
}

// created is an own node as createOwn made or found it. When the reply of
// its creation came, token is its creation zxid and stamp that write (the
// leader's time stamp, stamp.mtime); both are zero for a node found again,
// whose stat evaluate then reads.
type created struct {
	path  string
	token uint64
	stamp written
}

// createOwn returns acquisition id's node under parent: the one it has
// already (a retry), or a new ephemeral sequential one. The id is in the
// node's name, so after a create whose reply was lost the node, if it was
// made, is found among the children instead of being made twice
// (Curator's "protection").
func (d *Driver) createOwn(ctx context.Context, parent, kind, id string, data []byte) (created, error) {
	if p, ok := d.pathOf(id); ok {
		return created{path: p, stamp: written{answered: time.Now()}}, nil
	}
	prefix := parent + "/" + childPrefix(kind, id)
	lost := false
	for {
		if err := ctx.Err(); err != nil {
			return created{}, err
		}
		if lost {
			if p, found, err := d.findOwn(parent, id); err != nil && !isConnLoss(err) {
				return created{}, err
			} else if found {
				return created{path: p, stamp: written{answered: time.Now()}}, nil
			} else if err != nil {
				if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
					return created{}, err
				}
				continue
			}
		}
		c, err := d.create(prefix, data)
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := d.ensureParent(parent); err != nil {
				return created{}, err
			}
		case isConnLoss(err):
			lost = true
			if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
				return created{}, err
			}
		default:
			return created{}, fmt.Errorf("zkdriver: create under %s: %w", parent, err)
		}
	}
}

// create makes an ephemeral sequential node at prefix. It is sent as one
// multi request with a write of the prefix's stamp node: the multi is one
// transaction, so the stamp's new stat carries the creation's zxid (the
// token) and the leader's time stamp, which a plain create does not
// return and which would otherwise cost a read of the new node. Where the
// stamp node cannot be written (another client made it with an ACL this
// one does not pass), the driver falls back to plain creates for good.
func (d *Driver) create(prefix string, data []byte) (created, error) {
	flags := int32(zk.FlagEphemeral | zk.FlagSequence)
	if d.plainCreates.Load() {
		p, err := d.conn.Create(prefix, data, flags, d.acl)
		return created{path: p, stamp: written{answered: time.Now()}}, err
	}
	res, err := d.conn.Multi(
		&zk.CreateRequest{Path: prefix, Data: data, Acl: d.acl, Flags: flags},
		&zk.SetDataRequest{Path: d.stampNode(), Version: -1},
	)
	if err == nil && len(res) == 2 && res[1].Stat != nil {
		st := res[1].Stat
		return created{path: res[0].String, token: uint64(st.Mzxid), stamp: written{mtime: st.Mtime, answered: time.Now()}}, nil
	}
	if err == nil || len(res) != 2 {
		return created{}, fmt.Errorf("zkdriver: create: %d answers to a multi of 2: %w", len(res), cmp.Or(err, zk.ErrAPIError))
	}
	switch stampErr := res[1].Error; {
	case errors.Is(res[0].Error, zk.ErrNoNode):
		return created{}, res[0].Error // the name's node is missing
	case errors.Is(stampErr, zk.ErrNoNode):
		if err := d.ensureStamp(); err != nil {
			return created{}, err
		}
		return d.create(prefix, data)
	case errors.Is(stampErr, zk.ErrNoAuth):
		d.plainCreates.Store(true)
		return d.create(prefix, data)
	}
	return created{}, err
}

// ensureStamp creates the prefix's stamp node, and the prefix first if it
// is missing. One the prefix's ACL does not let this client create makes
// it fall back to plain creates for good, as a stamp it may not write
// does.
func (d *Driver) ensureStamp() error {
	for range 2 {
		_, err := d.conn.Create(d.stampNode(), nil, 0, d.acl)
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoAuth):
			d.plainCreates.Store(true)
			return nil
		case !errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("zkdriver: create %s: %w", d.stampNode(), err)
		}
		if err := d.ensurePrefix(); err != nil {
			return err
		}
	}
	return fmt.Errorf("zkdriver: create %s: %w", d.stampNode(), zk.ErrNoNode)
}

// stampName is the stamp node's name under the prefix: a '%' not followed
// by two hex digits, which no escaped lock name has, so names skips it.
const stampName = "%stamp"

func (d *Driver) stampNode() string { return d.prefix + "/" + stampName }

// findOwn looks for the node of id among parent's children. It syncs
// first: after a lost create reply the client may be on another server,
// which may not have applied that create yet, and would then hide it.
func (d *Driver) findOwn(parent, id string) (string, bool, error) {
	if _, err := d.conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", false, err
	}
	names, _, err := d.conn.Children(parent)
	if errors.Is(err, zk.ErrNoNode) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	for _, c := range sortedChildren(names) {
		if c.id == id {
			return parent + "/" + c.name, true, nil
		}
	}
	return "", false, nil
}

// ensureParent creates a name's node (a container: the server deletes it
// once its last child is gone) and the prefix's nodes above it.
func (d *Driver) ensureParent(parent string) error {
	_, err := d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl)
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	if !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("zkdriver: create %s: %w", parent, err)
	}
	if err := d.ensurePrefix(); err != nil {
		return err
	}
	if _, err := d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zkdriver: create %s: %w", parent, err)
	}
	return nil
}

// ensurePrefix creates the prefix's nodes that are missing, as persistent
// nodes: they are made once. A node that exists under a parent this client
// may not create in is refused as unauthorized, not as existing: it is
// looked for then.
func (d *Driver) ensurePrefix() error {
	p := ""
	for _, s := range strings.Split(strings.TrimPrefix(d.prefix, "/"), "/") {
		p += "/" + s
		_, err := d.conn.Create(p, nil, 0, d.acl)
		if err == nil || errors.Is(err, zk.ErrNodeExists) {
			continue
		}
		if ok, _, xerr := d.conn.Exists(p); xerr != nil || !ok {
			return fmt.Errorf("zkdriver: create %s: %w", p, err)
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// checkAlive reads the node at path and reports whether it is alive at
// now (leader's clock, ms) and how long it has left; an expired node is
// deleted, version-checked. With watch, the read also watches the node
// (its deletion or next change fires ch), for a waiter that it blocks.
func (d *Driver) checkAlive(path string, now int64, watch bool) (left time.Duration, alive bool, ch <-chan zk.Event, err error) {
	var b []byte
	var st *zk.Stat
	if watch {
		b, st, ch, err = d.conn.GetW(path)
	} else {
		b, st, err = d.conn.Get(path)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil, nil
	}
	if err != nil {
		return 0, false, nil, fmt.Errorf("zkdriver: get %s: %w", path, err)
	}
	nd, err := decodeData(b)
	if err != nil {
		// Not ours to judge: alive until its session ends. How long is
		// unknown (-1), so the waiter looks again on the watch or its
		// fallback, not at once.
		return -1, true, ch, nil
	}
	left = time.Duration(st.Mtime+nd.TTLms-now) * time.Millisecond
	if left >= 0 {
		return min(left, time.Duration(nd.TTLms)*time.Millisecond), true, ch, nil
	}
	switch err := d.conn.Delete(path, st.Version); {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		return 0, false, nil, nil
	case errors.Is(err, zk.ErrBadVersion):
		return 0, true, ch, nil // renewed meanwhile
	default:
		return 0, false, nil, fmt.Errorf("zkdriver: delete expired %s: %w", path, err)
	}
}

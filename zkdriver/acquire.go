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

// Acquire implements driver.Driver. It creates the acquisition's
// ephemeral sequential node under the name's node, then reads the name's
// children and its own node's stat together: the lock is granted when no
// live node is ahead of its own, and its token is its node's creation
// zxid. Expired nodes ahead (not modified for their TTL, by the leader's
// clock) are deleted on the way. A refused acquisition deletes its node.
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
	own, err := d.createOwn(ctx, parent, kindExclusive, req.ID, nd.encode())
	if err != nil {
		return driver.AcquireResult{}, err
	}
	last := written{answered: time.Now()} // the creation's
	v, err := d.evaluate(parent, own, driver.ModeExclusive, 0, last, evalOpts{})
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if v.granted {
		d.remember(req.ID, ownNode{path: own, key: req.Key, kind: kindExclusive, data: nd, sent: sent, last: last})
		return driver.AcquireResult{Acquired: true, Token: v.token}, nil
	}
	if !retry || v.gone {
		d.dropOwn(req.ID, own)
	}
	return driver.AcquireResult{RetryAfter: v.retryAfter}, nil
}

// dropOwn deletes a node of ours that was refused. A delete whose reply is
// lost leaves the node to its TTL (see evaluate), not to the session.
func (d *Driver) dropOwn(id, path string) {
	d.forget(id, false)
	_ = d.conn.Delete(path, -1)
}

// createOwn returns the path of acquisition id's node under parent: the
// one it has already (a retry), or a new ephemeral sequential one. The
// id is in the node's name, so after a create whose reply was lost the
// node, if it was made, is found among the children instead of being
// made twice (Curator's "protection").
func (d *Driver) createOwn(ctx context.Context, parent, kind, id string, data []byte) (string, error) {
	if p, ok := d.pathOf(id); ok {
		return p, nil
	}
	prefix := parent + "/" + childPrefix(kind, id)
	lost := false
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if lost {
			if p, found, err := d.findOwn(parent, id); err != nil && !isConnLoss(err) {
				return "", err
			} else if found {
				return p, nil
			} else if err != nil {
				if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
					return "", err
				}
				continue
			}
		}
		p, err := d.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, d.acl)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := d.ensureParent(parent); err != nil {
				return "", err
			}
		case isConnLoss(err):
			lost = true
			if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
				return "", err
			}
		default:
			return "", fmt.Errorf("zkdriver: create under %s: %w", parent, err)
		}
	}
}

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
	// The prefix is missing: it is made once, as persistent nodes.
	segs := strings.Split(strings.TrimPrefix(d.prefix, "/"), "/")
	p := ""
	for _, s := range segs {
		p += "/" + s
		if _, err := d.conn.Create(p, nil, 0, d.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("zkdriver: create %s: %w", p, err)
		}
	}
	if _, err := d.conn.CreateContainer(parent, nil, zk.FlagContainer, d.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("zkdriver: create %s: %w", parent, err)
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

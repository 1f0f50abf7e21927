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
	nd := newData(req.TTL, time.Now(), req.Owner)
	own, err := d.createOwn(ctx, parent, kindExclusive, req.ID, nd.encode())
	if err != nil {
		return driver.AcquireResult{}, err
	}
	v, err := d.evaluate(parent, own)
	if err != nil {
		return driver.AcquireResult{}, err
	}
	if v.granted {
		d.remember(req.ID, ownNode{path: own, data: nd})
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

// findOwn looks for the node of id among parent's children.
func (d *Driver) findOwn(parent, id string) (string, bool, error) {
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

// verdict is what evaluate found for one node of ours.
type verdict struct {
	granted    bool
	gone       bool   // our own node no longer exists
	token      uint64 // our node's creation zxid
	retryAfter time.Duration
	ahead      []child // live nodes ahead of ours, in order
}

// evaluate reads parent's children and own's stat in one round trip (two
// requests in flight together) and decides whether own is granted: no
// live node is ahead of it. A node ahead whose TTL passed since its last
// modification, judged against own's creation time (both the leader's
// clock), is deleted if it is still at the version read.
func (d *Driver) evaluate(parent, own string) (verdict, error) {
	type statRes struct {
		ok  bool
		st  *zk.Stat
		err error
	}
	sc := make(chan statRes, 1)
	go func() {
		ok, st, err := d.conn.Exists(own)
		sc <- statRes{ok, st, err}
	}()
	names, _, cerr := d.conn.Children(parent)
	sr := <-sc
	if sr.err != nil {
		return verdict{}, fmt.Errorf("zkdriver: stat %s: %w", own, sr.err)
	}
	if !sr.ok {
		return verdict{gone: true, retryAfter: 0}, nil
	}
	if cerr != nil {
		return verdict{}, fmt.Errorf("zkdriver: children of %s: %w", parent, cerr)
	}
	ownName := own[strings.LastIndexByte(own, '/')+1:]
	v := verdict{token: uint64(sr.st.Czxid), retryAfter: -1}
	now := sr.st.Ctime
	for _, c := range sortedChildren(names) {
		if c.name == ownName {
			break
		}
		left, alive, err := d.checkAlive(parent+"/"+c.name, now)
		if err != nil {
			return verdict{}, err
		}
		if !alive {
			continue
		}
		if len(v.ahead) == 0 {
			v.retryAfter = left
		}
		v.ahead = append(v.ahead, c)
		break
	}
	v.granted = len(v.ahead) == 0
	return v, nil
}

// checkAlive reads the node at path and reports whether it is alive at
// now (leader's clock, ms) and how long it has left; an expired node is
// deleted, version-checked.
func (d *Driver) checkAlive(path string, now int64) (time.Duration, bool, error) {
	b, st, err := d.conn.Get(path)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("zkdriver: get %s: %w", path, err)
	}
	nd, err := decodeData(b)
	if err != nil {
		return 0, true, nil // not ours to judge: alive until its session ends
	}
	left := time.Duration(st.Mtime+nd.TTLms-now) * time.Millisecond
	if left >= 0 {
		return min(left, time.Duration(nd.TTLms)*time.Millisecond), true, nil
	}
	switch err := d.conn.Delete(path, st.Version); {
	case err == nil, errors.Is(err, zk.ErrNoNode):
		return 0, false, nil
	case errors.Is(err, zk.ErrBadVersion):
		return 0, true, nil // renewed meanwhile
	default:
		return 0, false, fmt.Errorf("zkdriver: delete expired %s: %w", path, err)
	}
}

package zkdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Release implements driver.Driver: each lease's node is deleted, the
// deletes of a batch sent together. The deletion is what wakes the
// lease's waiters (their watches on it fire).
// A retry of a release this driver made is answered AlreadyReleased.
func (d *Driver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	for _, r := range reqs {
		if err := d.checkKind(r.Kind); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// One delete per lease, all in flight together on the connection: a
	// batch costs one round trip, not one per lease.
	out := make([]driver.ReleaseResult, len(reqs))
	errs := make([]error, len(reqs))
	err := untilDone(ctx, func() {
		if len(reqs) == 1 { // most Unlocks: no goroutine more to wait on
			out[0], errs[0] = d.releaseOne(reqs[0])
			return
		}
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Go(func() { out[i], errs[i] = d.releaseOne(r) })
		}
		wg.Wait()
	})
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// untilDone runs f, and returns when it has, or with ctx's error when ctx
// ends first: go-zookeeper's requests take no context, and one sent while
// the servers are out of reach is answered only when the client gives up
// on the connection (two thirds of the session timeout, ten times that
// during a handshake). An abandoned f goes on until then, or until the
// connection is closed; what it writes is no longer read.
func untilDone(ctx context.Context, f func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Driver) checkKind(k driver.Kind) error {
	return k.Check()
}

// kindFits reports whether a lease of kind k can be the node of kind
// nodeKind: a waiter's place is any node (granted or not).
func kindFits(k driver.Kind, nodeKind string) bool {
	m, _, ok := kindMode(nodeKind)
	return ok && (k == driver.KindWaiter || m.HolderKind() == k)
}

func (d *Driver) releaseOne(r driver.ReleaseRequest) (driver.ReleaseResult, error) {
	if r.Settled != "" {
		d.mu.Lock()
		delete(d.released.at, r.Settled)
		d.mu.Unlock()
	}
	n, ok := d.nodeOf(r.ID)
	path := n.path
	if ok && !kindFits(r.Kind, n.kind) {
		return driver.NotHeld, nil
	}
	if !ok {
		if d.wasReleased(r.ID) {
			return driver.AlreadyReleased, nil
		}
		p, found, err := d.findOwn(d.nameNode(r.Key), r.ID)
		if err != nil {
			return 0, fmt.Errorf("zkdriver: release %q: %w", r.Key, err)
		}
		if c, _ := parseChild(p[lastSlash(p)+1:]); !found || !kindFits(r.Kind, c.kind) {
			return driver.NotHeld, nil
		}
		path = p
	}
	// A node not remembered (found again) notes its release: whether
	// others use the name is unknown.
	err := d.deleteOwn(path, r.Kind == driver.KindLock && (!ok || n.shared))
	switch {
	case err == nil:
		d.forget(r.ID, true)
		return driver.Released, nil
	case errors.Is(err, zk.ErrNoNode) && ok && n.deleteSent:
		// An earlier delete whose answer was lost: it was applied (or the
		// node expired after the Unlock that sent it, when no one could
		// believe it held any more). A retried Unlock answers nil.
		d.forget(r.ID, true)
		return driver.AlreadyReleased, nil
	case errors.Is(err, zk.ErrNoNode):
		d.forget(r.ID, false)
		return driver.NotHeld, nil
	default:
		if isConnLoss(err) {
			d.update(r.ID, func(n *ownNode) { n.deleteSent = true })
		}
		return 0, fmt.Errorf("zkdriver: release %q: %w", r.Key, err)
	}
}

// deleteOwn deletes an own node. With note, an exclusive holder's release
// also notes itself in the name's node, in the same transaction (a multi
// request): the waiter it grants was acquired then (see grantedByRelease),
// which Inspect shows, and the waiter need not write that down itself.
// Release asks for the note only where the name was seen in use by others:
// a lone holder's release (most uncontended cycles) costs a plain delete,
// and a waiter that joined behind it unseen notes its own grant. Where the
// name's node refuses the write (another client made it with an ACL this
// one does not pass), the driver deletes plainly from then on.
func (d *Driver) deleteOwn(path string, note bool) error {
	name := path[lastSlash(path)+1:]
	if c, _ := parseChild(name); !note || c.kind != kindExclusive || d.plainReleases.Load() {
		return d.conn.Delete(path, -1)
	}
	b, _ := json.Marshal(nameNote{Released: name, Since: time.Now().UnixNano()})
	res, err := d.conn.Multi(
		&zk.DeleteRequest{Path: path, Version: -1},
		&zk.SetDataRequest{Path: path[:lastSlash(path)], Data: b, Version: -1},
	)
	if errors.Is(err, zk.ErrNoAuth) && len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoAuth) {
		d.plainReleases.Store(true)
		return d.conn.Delete(path, -1)
	}
	return err
}

// Renew implements driver.Driver: one multi request rewrites every
// lease's node with its new TTL (a write, so that it is ordered with the
// deletions of expired nodes and the leader stamps a new modification
// time). A multi is all or none: when a node is gone, the batch is
// retried without it.
func (d *Driver) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	for _, r := range reqs {
		if err := d.checkKind(r.Kind); err != nil {
			return nil, err
		}
		if err := d.checkTTL(r.TTL); err != nil {
			return nil, err
		}
	}
	held := make([]bool, len(reqs))
	idx := make([]int, 0, len(reqs))
	sent := time.Now()
	var expired []string
	for i, r := range reqs {
		switch ok, path := d.renewable(r, sent); {
		case ok:
			idx = append(idx, i)
		case path != "":
			expired = append(expired, path)
		}
	}
	// Expired nodes are deleted while the renewal is under way, all in
	// flight together: none waits for another, nor holds up the renewal.
	var wg sync.WaitGroup
	for _, p := range expired {
		wg.Go(func() { _ = d.conn.Delete(p, -1) })
	}
	defer func() { _ = untilDone(ctx, wg.Wait) }()
	for len(idx) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ops := make([]any, 0, len(idx))
		live := idx[:0:0]
		for _, i := range idx {
			// A Release running at the same time may have forgotten the
			// lease since: it is not held, and its path is gone (an empty
			// one would fail the whole multi).
			if n, ok := d.nodeOf(reqs[i].ID); ok {
				ops = append(ops, &zk.SetDataRequest{Path: n.path, Data: renewData(n, reqs[i].TTL), Version: -1})
				live = append(live, i)
			}
		}
		if idx = live; len(idx) == 0 {
			break
		}
		var res []zk.MultiResponse
		var err error
		if werr := untilDone(ctx, func() { res, err = d.conn.Multi(ops...) }); werr != nil {
			return nil, werr
		}
		if err == nil {
			answered := time.Now()
			for j, i := range idx {
				held[i] = true
				ttl := reqs[i].TTL
				last := written{answered: answered}
				if st := res[j].Stat; st != nil {
					last.mtime = st.Mtime
				}
				d.update(reqs[i].ID, func(n *ownNode) {
					n.sent, n.last, n.data.TTLms = sent, last, ttl.Milliseconds()
				})
			}
			return held, nil
		}
		if len(res) != len(idx) {
			return nil, fmt.Errorf("zkdriver: renew: %w", err)
		}
		next := idx[:0:0]
		for j, i := range idx {
			if errors.Is(res[j].Error, zk.ErrNoNode) {
				d.forget(reqs[i].ID, false)
				continue
			}
			next = append(next, i)
		}
		if len(next) == len(idx) {
			return nil, fmt.Errorf("zkdriver: renew: %w", err)
		}
		idx = next
	}
	return held, nil
}

// renewable reports whether r's lease may be renewed: a node of its kind
// that this driver made, whose TTL has not run out by this client's clock
// (the store may count it expired then: it is forgotten, and its path
// returned, to be deleted); a waiter's place only while the waiter is not
// known to be granted.
func (d *Driver) renewable(r driver.RenewRequest, now time.Time) (ok bool, expired string) {
	n, ok := d.nodeOf(r.ID)
	if !ok || !kindFits(r.Kind, n.kind) || (r.Kind == driver.KindWaiter && n.granted) {
		return false, ""
	}
	if now.Sub(n.sent) >= time.Duration(n.data.TTLms)*time.Millisecond {
		d.forget(r.ID, false)
		return false, n.path
	}
	return true, ""
}

func lastSlash(p string) int { return strings.LastIndexByte(p, '/') }

// renewData is a lease node's data with its new TTL; the rest (owner and
// acquisition time) is what the driver wrote at acquisition.
func renewData(n ownNode, ttl time.Duration) []byte {
	nd := n.data
	nd.TTLms = ttl.Milliseconds()
	return nd.encode()
}

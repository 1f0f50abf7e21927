package zkdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

var _ driver.Queuer = (*Driver)(nil)

func checkQueueRequest(req driver.QueueRequest) error {
	switch {
	case req.ID == "":
		return fmt.Errorf("%w: queue request without an id", driver.ErrInvalid)
	case req.Mode < driver.ModeExclusive || req.Mode > driver.ModePermit:
		return fmt.Errorf("%w: queue mode %v", driver.ErrInvalid, req.Mode)
	case req.Mode == driver.ModePermit && req.Limit < 1:
		return fmt.Errorf("%w: permit limit %d", driver.ErrInvalid, req.Limit)
	case req.Wait && req.Inbox == "":
		return fmt.Errorf("%w: waiting queue request without an inbox", driver.ErrInvalid)
	case req.MaxWaiters < 0:
		return fmt.Errorf("%w: MaxWaiters %d", driver.ErrInvalid, req.MaxWaiters)
	}
	return nil
}

// Enqueue implements driver.Queuer. A new request creates its node, of
// its mode's kind, and is judged as Acquire's is (evaluate): granted, or
// queued (its node stays, and a monitor of this Driver watches the one
// node ahead that blocks it), or refused (its node is deleted). A request
// whose id has a node already is judged again and has its TTL set anew.
func (d *Driver) Enqueue(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, error) {
	if err := checkQueueRequest(req); err != nil {
		return driver.QueueResult{}, err
	}
	if err := d.checkTTL(req.TTL); err != nil {
		return driver.QueueResult{}, err
	}
	if d.isClosed() {
		return driver.QueueResult{}, errClosed
	}
	for {
		res, again, err := d.enqueueOnce(ctx, req)
		if !again {
			return res, err
		}
	}
}

func (d *Driver) enqueueOnce(ctx context.Context, req driver.QueueRequest) (driver.QueueResult, bool, error) {
	parent := d.nameNode(req.Key)
	kind := modeKind(req.Mode, req.Limit)
	old, existed := d.nodeOf(req.ID)
	sent := time.Now()
	nd := newData(req.TTL, sent, req.Owner)
	own, err := d.createOwn(ctx, parent, kind, req.ID, nd.encode())
	if err != nil {
		return driver.QueueResult{}, false, err
	}
	if existed {
		// A retry, or a waiter asking about its grant: the TTL counts
		// from now, the rest of the node stays.
		nd = old.data
		nd.TTLms = req.TTL.Milliseconds()
		if _, err := d.conn.Set(own, nd.encode(), -1); err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				d.forget(req.ID, false)
				return driver.QueueResult{}, true, nil // expired or broken: ask anew
			}
			return driver.QueueResult{}, false, fmt.Errorf("zkdriver: extend %s: %w", own, err)
		}
	}
	answered := time.Now()
	v, err := d.evaluate(parent, own, req.Mode, req.Limit, answered)
	if err != nil {
		return driver.QueueResult{}, false, err
	}
	if v.gone { // expired or broken since: ask anew
		d.forget(req.ID, false)
		return driver.QueueResult{}, true, nil
	}
	if !existed {
		if err := d.admit(req, v); err != nil {
			d.dropOwn(req.ID, own)
			return driver.QueueResult{}, false, err
		}
	}
	n := ownNode{path: own, key: req.Key, kind: kind, data: nd, sent: sent, answered: answered, inbox: req.Inbox, granted: v.granted}
	switch {
	case v.granted:
		d.remember(req.ID, n)
		d.stopMonitor(req.ID)
		return driver.QueueResult{Granted: true, Token: v.token}, false, nil
	case !req.Wait && !existed:
		d.dropOwn(req.ID, own)
		return driver.QueueResult{RetryAfter: v.retryAfter}, false, nil
	}
	d.remember(req.ID, n)
	d.startMonitor(req.ID)
	return driver.QueueResult{Queued: true, RetryAfter: v.retryAfter}, false, nil
}

// admit refuses a new request that the name's queue does not take.
func (d *Driver) admit(req driver.QueueRequest, v verdict) error {
	if v.mismatch {
		return driver.ErrLimitMismatch
	}
	if !v.granted && req.Wait && req.MaxWaiters > 0 && v.waitersAhead >= req.MaxWaiters {
		return driver.ErrQueueFull
	}
	return nil
}

// startMonitor starts the goroutine that tells waiter id of its grant,
// unless one runs.
func (d *Driver) startMonitor(id string) {
	d.mu.Lock()
	n, ok := d.paths[id]
	if !ok || n.stop != nil || d.closed {
		d.mu.Unlock()
		return
	}
	n.stop = make(chan struct{})
	d.paths[id] = n
	d.monitors.Add(1)
	d.mu.Unlock()
	go d.monitor(id, n)
}

func (d *Driver) stopMonitor(id string) {
	d.update(id, func(n *ownNode) {
		if n.stop != nil {
			close(n.stop)
			n.stop = nil
		}
	})
}

// monitor waits for waiter id's grant: it watches the node that blocks it
// (or, for a permit, the name's children), and judges again when that
// watch fires or when the blocking node's TTL runs out. A grant is
// announced on the waiter's inbox, once.
func (d *Driver) monitor(id string, n ownNode) {
	defer d.monitors.Done()
	parent := d.nameNode(n.key)
	mode, limit, _ := kindMode(n.kind)
	for {
		if cur, ok := d.nodeOf(id); ok {
			n.answered = cur.answered
		}
		var ch <-chan zk.Event
		var err error
		if mode == driver.ModePermit {
			// Any departure ahead may grant a permit: watch the children
			// before reading them, so none is missed in between.
			_, _, ch, err = d.conn.ChildrenW(parent)
		}
		var v verdict
		if err == nil {
			v, err = d.evaluate(parent, n.path, mode, limit, n.answered)
		}
		switch {
		case err != nil:
		case v.gone:
			return
		case v.granted:
			d.granted(id, n, v.token)
			return
		case v.watchChildren:
		default:
			var ok bool
			ok, _, ch, err = d.conn.ExistsW(v.watch)
			if err == nil && !ok {
				continue
			}
		}
		wait := v.retryAfter
		if err != nil || wait < 0 {
			wait = time.Second // a failed read, or nothing to time: look again soon
		}
		t := time.NewTimer(wait + time.Millisecond)
		select {
		case <-n.stop:
			t.Stop()
			return
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// granted records and announces waiter id's grant. The node's acquisition
// time becomes now, and its TTL what the waiter's place had left by this
// client's clock, so that the grant lasts no longer in the store than the
// place would have.
func (d *Driver) granted(id string, n ownNode, token uint64) {
	at := time.Now()
	left := n.data.TTLms - at.Sub(n.sent).Milliseconds()
	if left > 0 {
		nd := n.data
		nd.Since, nd.TTLms = at.UnixNano(), left
		if _, err := d.conn.Set(n.path, nd.encode(), -1); err == nil {
			d.update(id, func(m *ownNode) { m.data, m.sent, m.answered = nd, at, time.Now() })
		}
	}
	d.update(id, func(m *ownNode) { m.granted, m.stop = true, nil })
	d.sinks.announce(n.inbox, driver.Grant{Key: n.key, ID: id, Token: token, Confirmed: true})
}

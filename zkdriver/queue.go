package zkdriver

import (
	"context"
	"encoding/json"
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
	c, err := d.createOwn(ctx, parent, kind, req.ID, nd.encode())
	if err != nil {
		return driver.QueueResult{}, false, err
	}
	own, last, token := c.path, c.stamp, c.token
	if existed {
		// A retry, or a waiter asking about its grant: the TTL counts
		// from now, the rest of the node stays.
		nd = old.data
		nd.TTLms = req.TTL.Milliseconds()
		st, err := d.conn.Set(own, nd.encode(), -1)
		if err != nil {
			if errors.Is(err, zk.ErrNoNode) {
				d.forget(req.ID, false)
				return driver.QueueResult{}, true, nil // expired or broken: ask anew
			}
			return driver.QueueResult{}, false, fmt.Errorf("zkdriver: extend %s: %w", own, err)
		}
		last = written{mtime: st.Mtime, answered: time.Now()}
		token = uint64(st.Czxid)
	}
	v, err := d.evaluate(parent, own, req.Mode, req.Limit, last, evalOpts{watch: req.Wait, token: token})
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
	n := ownNode{path: own, key: req.Key, kind: kind, data: nd, sent: sent, last: last, inbox: req.Inbox, granted: v.granted, shared: v.shared}
	switch {
	case v.granted:
		d.remember(req.ID, n)
		d.stopMonitor(req.ID)
		if existed && !old.granted && kind == kindExclusive {
			d.noteGrant(req.Key, req.ID, v, "") // a waiter granted here, not by its monitor
		}
		return driver.QueueResult{Granted: true, Token: v.token}, false, nil
	case !req.Wait && !existed:
		d.dropOwn(req.ID, own)
		return driver.QueueResult{RetryAfter: v.retryAfter}, false, nil
	}
	d.remember(req.ID, n)
	d.startMonitor(req.ID, v)
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
func (d *Driver) startMonitor(id string, first verdict) {
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
	go d.monitor(id, n, first)
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
// announced on the waiter's inbox, once. first is the Enqueue's verdict,
// which the first watch follows without reading the name again.
func (d *Driver) monitor(id string, n ownNode, first verdict) {
	defer d.monitors.Done()
	parent := d.nameNode(n.key)
	mode, limit, _ := kindMode(n.kind)
	token := first.token
	v, err := first, error(nil)
	// A permit's first verdict has no watch on the children (Enqueue
	// reads them without one): judge again at once, with it.
	judgeNow := first.watchCh == nil
	for {
		if judgeNow {
			judgeNow = false
		} else if v.watchCh != nil {
			// Wait on the watch of the last read. A change of the
			// blocking node's data (its renewal, or its grant written
			// down) is no departure: watch it again, one request, and
			// keep the timer, which only fires early for a node renewed.
			deadline := time.Now().Add(v.retryAfter)
			for {
				ev, ok := d.await(n, v.watchCh, time.Until(deadline), v.retryAfter >= 0)
				if !ok {
					return
				}
				if ev.Type != zk.EventNodeDataChanged || v.watch == "" {
					break
				}
				var exists bool
				if exists, _, v.watchCh, err = d.conn.ExistsW(v.watch); err != nil || !exists {
					break
				}
			}
		} else if _, ok := d.await(n, nil, v.retryAfter, err == nil && v.retryAfter >= 0); !ok {
			return
		}
		if cur, ok := d.nodeOf(id); ok {
			n.last = cur.last
		}
		watched := v.watch
		v, err = d.judgeAgain(parent, n, mode, limit, token)
		switch {
		case err != nil:
		case v.gone:
			return
		case v.granted:
			d.granted(id, n, v, watched)
			return
		}
	}
}

// judgeAgain is a waiter's evaluate, with a watch on what blocks it.
func (d *Driver) judgeAgain(parent string, n ownNode, mode driver.Mode, limit int, token uint64) (verdict, error) {
	var ch <-chan zk.Event
	if mode == driver.ModePermit {
		// Any departure ahead may grant a permit: watch the children
		// before reading them, so none is missed in between.
		var err error
		if _, _, ch, err = d.conn.ChildrenW(parent); err != nil {
			return verdict{}, err
		}
	}
	v, err := d.evaluate(parent, n.path, mode, limit, n.last, evalOpts{watch: true, token: token})
	if v.watchChildren {
		v.watchCh = ch
	}
	return v, err
}

// await waits for watch ch to fire (its event is returned) or, when
// timed, for wait to pass; untimed, it looks again after a second (a
// failed read, or nothing to time). It reports false when the monitor is
// stopped instead.
func (d *Driver) await(n ownNode, ch <-chan zk.Event, wait time.Duration, timed bool) (zk.Event, bool) {
	if !timed {
		wait = time.Second
	}
	t := time.NewTimer(max(wait, 0) + time.Millisecond)
	defer t.Stop()
	select {
	case <-n.stop:
		return zk.Event{}, false
	case ev := <-ch:
		return ev, true
	case <-t.C:
	}
	return zk.Event{}, true
}

// granted records and announces waiter id's grant, then notes it
// (noteGrant).
func (d *Driver) granted(id string, n ownNode, v verdict, watched string) {
	d.update(id, func(m *ownNode) { m.granted, m.stop, m.shared = true, nil, true })
	d.sinks.announce(n.inbox, driver.Grant{Key: n.key, ID: id, Token: v.token, Confirmed: true})
	if n.kind == kindExclusive {
		d.noteGrant(n.key, id, v, watched)
	}
}

// noteGrant makes an exclusive grant's time what Inspect shows as Since.
// The release that made it noted it already in the name's node
// (release.go) when that release is what granted the waiter, which the
// node's stat or data tell (grantedByRelease); any other grant (the node
// ahead was released without a note, expired, or ended with its session)
// is noted here, with the holder's id. The note goes into the name's node,
// not into the holder's own, whose next waiter's watch a write would wake.
// It is written only over the note the grant's read saw: a newer one is of
// a release after this grant (the holder may unlock at once), which an
// older grant's note must not hide.
func (d *Driver) noteGrant(key, id string, v verdict, watched string) {
	if v.name == nil || d.grantedByRelease(key, v, watched) {
		return
	}
	b, _ := json.Marshal(nameNote{ID: id, Since: time.Now().UnixNano()})
	_, _ = d.conn.Set(d.nameNode(key), b, v.name.Version)
}

// grantedByRelease reports whether a noted release of the node ahead
// granted verdict v, whose waiter watched that node last. Only a holder's
// release writes a note, in the same transaction as its node's deletion,
// and no node behind a waiter is granted before it: so when the last
// change of the name's children is also the last write of its data (one
// zxid), that change was the release that granted v. Otherwise (waiters
// joined since) the note is read: it names the node released.
func (d *Driver) grantedByRelease(key string, v verdict, watched string) bool {
	switch {
	case !v.byNames:
		return false // the nodes ahead were judged: one expired
	case v.name.Mzxid == v.name.Pzxid:
		return true
	case watched == "":
		return false
	}
	b, _, err := d.conn.Get(d.nameNode(key))
	var nt nameNote
	return err == nil && json.Unmarshal(b, &nt) == nil && nt.Released != "" && nt.Released == watched[lastSlash(watched)+1:]
}

// nameNote is the data of a name's node: the latest exclusive release
// (Released: the released node's name) or, when a grant did not follow
// from one, the latest exclusive grant from the queue (ID: the holder's
// acquisition id); Since is when, by the writing Driver's clock.
type nameNote struct {
	ID       string `json:"id,omitempty"`
	Released string `json:"released,omitempty"`
	Since    int64  `json:"since"` // Unix ns
}

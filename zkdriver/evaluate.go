package zkdriver

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Node kinds, the first part of a node's name: which mode it asks for.
const (
	kindShared = "r"
	kindPermit = "p" // followed by the name's permit limit: p3
)

// modeKind is the node kind of a request of mode (and limit, for permits).
func modeKind(m driver.Mode, limit int) string {
	switch m {
	case driver.ModeShared:
		return kindShared
	case driver.ModePermit:
		return kindPermit + strconv.Itoa(limit)
	}
	return kindExclusive
}

// kindMode reads a node kind back; ok is false for kinds dlock did not write.
func kindMode(kind string) (m driver.Mode, limit int, ok bool) {
	switch {
	case kind == kindExclusive:
		return driver.ModeExclusive, 0, true
	case kind == kindShared:
		return driver.ModeShared, 0, true
	case strings.HasPrefix(kind, kindPermit):
		n, err := strconv.Atoi(kind[len(kindPermit):])
		return driver.ModePermit, n, err == nil && n > 0
	}
	return 0, 0, false
}

// verdict is what evaluate found for one node of ours.
type verdict struct {
	granted    bool
	gone       bool   // our own node no longer exists
	token      uint64 // our node's creation zxid
	retryAfter time.Duration
	// watch is the node whose deletion may grant ours; empty with
	// watchChildren (permits: any departure ahead may).
	watch         string
	watchCh       <-chan zk.Event // the watch on it, with evalOpts.watch
	watchChildren bool
	mismatch      bool // a permit node ahead has another limit
	waitersAhead  int  // nodes ahead that are not granted, by their names
	// byNames is set on a grant that the names of the nodes ahead decided
	// alone (none ahead, or none that can block).
	byNames bool
	name    *zk.Stat // the name node's, as the children read returned it
	// shared is set when the read showed other nodes under the name, ahead
	// or behind: a name in use by others, whose release a waiter may be
	// granted by (see deleteOwn).
	shared bool
}

// evaluate reads parent's children and decides whether own, a request of
// mode, is granted: strictly in arrival order, an exclusive node when no
// live node is ahead, a shared one when only shared nodes are, a permit
// when only fewer than limit live permits are. It reads only the nodes
// that decide: an exclusive node its nearest live predecessor, a shared
// one the nearest other kind ahead. A node ahead whose TTL passed since
// its last modification is deleted if it is still at the version read:
// both times are the leader's clock (mtime), own's last answered write
// moved on by this client's clock since that answer (written.leaderNow).
// Own's stat is read too, in the same round trip, unless the caller knows
// both own's token and that write's stamp (not for a node found again).
// evalOpts are what a caller of evaluate knows or wants besides the node.
type evalOpts struct {
	watch bool   // watch the node that blocks own (a waiter's)
	token uint64 // own's creation zxid, when known (0: read it)
}

func (d *Driver) evaluate(parent, own string, mode driver.Mode, limit int, last written, o evalOpts) (verdict, error) {
	names, pst, st, err := d.readOwnQueue(parent, own, o.token == 0 || last.mtime == 0)
	if err != nil {
		return verdict{}, err
	}
	ahead, found := childrenAhead(names, own)
	if !found {
		return verdict{gone: true}, nil
	}
	v := verdict{token: o.token, retryAfter: -1, waitersAhead: waitersAmong(ahead), shared: len(names) > 1, name: pst}
	if st != nil {
		v.token = uint64(st.Czxid)
	}
	if mode == driver.ModePermit {
		for _, c := range ahead {
			if m, l, ok := kindMode(c.kind); ok && m == driver.ModePermit && l != limit {
				v.mismatch = true
			}
		}
	}
	if grantedByNames(ahead, mode, limit) {
		// Whatever the nodes ahead are, alive or expired.
		v.granted, v.byNames = true, true
		return v, nil
	}
	// The leader's clock now, at least: own's last answered write's
	// stamp, plus the time since its answer came back (less than since
	// the leader stamped it), so an expiry is never judged early.
	now := last.leaderNow(st)
	if mode == driver.ModePermit {
		err = d.judgePermit(parent, ahead, now, limit, &v)
	} else {
		err = d.judgeBackwards(parent, ahead, now, mode, o.watch, &v)
	}
	return v, err
}

// readOwnQueue reads parent's children (and parent's stat) and, with
// withStat, own's stat in the same round trip (two requests in flight
// together). A stat that shows own gone comes back as nil names.
func (d *Driver) readOwnQueue(parent, own string, withStat bool) (names []string, pst, st *zk.Stat, err error) {
	if !withStat {
		names, pst, err := d.conn.Children(parent)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("zkdriver: children of %s: %w", parent, err)
		}
		return names, pst, nil, nil
	}
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
	names, pst, cerr := d.conn.Children(parent)
	sr := <-sc
	switch {
	case sr.err != nil:
		return nil, nil, nil, fmt.Errorf("zkdriver: stat %s: %w", own, sr.err)
	case !sr.ok:
		return nil, nil, nil, nil
	case cerr != nil:
		return nil, nil, nil, fmt.Errorf("zkdriver: children of %s: %w", parent, cerr)
	}
	return names, pst, sr.st, nil
}

// judgeBackwards decides an exclusive or shared node: it walks back from
// the nearest node ahead; the first live node that blocks is the one to
// watch.
func (d *Driver) judgeBackwards(parent string, ahead []child, now int64, mode driver.Mode, watch bool, v *verdict) error {
	for i := len(ahead) - 1; i >= 0; i-- {
		c := ahead[i]
		if mode == driver.ModeShared && c.kind == kindShared {
			continue // readers ahead never block a reader
		}
		p := parent + "/" + c.name
		left, alive, ch, err := d.checkAlive(p, now, watch)
		if err != nil {
			return err
		}
		if alive {
			v.watch, v.watchCh, v.retryAfter = p, ch, left
			return nil
		}
	}
	v.granted = true
	return nil
}

// judgePermit decides a permit: every live node ahead must be a permit,
// and fewer than limit of them.
func (d *Driver) judgePermit(parent string, ahead []child, now int64, limit int, v *verdict) error {
	held := 0
	for _, c := range ahead {
		p := parent + "/" + c.name
		left, alive, _, err := d.checkAlive(p, now, false)
		if err != nil {
			return err
		}
		if !alive {
			continue
		}
		if v.retryAfter < 0 || left < v.retryAfter {
			v.retryAfter = left
		}
		if m, _, _ := kindMode(c.kind); m != driver.ModePermit {
			v.watchChildren = true
			return nil
		}
		held++
	}
	if held >= limit {
		v.watchChildren = true
		return nil
	}
	v.granted, v.retryAfter = true, -1
	return nil
}

// waitersAmong counts, by their names, the nodes of cs that the grant rule
// leaves waiting: all but the leading run of holders.
func waitersAmong(cs []child) int {
	holders := 0
	for i, c := range cs {
		m, l, ok := kindMode(c.kind)
		if !ok {
			return len(cs) - i
		}
		fits := i == 0
		if i > 0 {
			pm, _, _ := kindMode(cs[0].kind)
			fits = pm == m && m != driver.ModeExclusive && (m == driver.ModeShared || i < l)
		}
		if !fits {
			break
		}
		holders++
	}
	return len(cs) - holders
}

// childrenAhead returns the children ahead of own, in order, and whether
// own is among them.
func childrenAhead(names []string, own string) ([]child, bool) {
	ownName := own[strings.LastIndexByte(own, '/')+1:]
	var ahead []child
	for _, c := range sortedChildren(names) {
		if c.name == ownName {
			return ahead, true
		}
		ahead = append(ahead, c)
	}
	return ahead, false
}

// grantedByNames reports whether a request of mode is granted whatever the
// nodes ahead of it are, alive or expired: none ahead, or for a reader
// only readers, or for a permit fewer than limit permits.
func grantedByNames(ahead []child, mode driver.Mode, limit int) bool {
	for _, c := range ahead {
		m, _, _ := kindMode(c.kind)
		if m != mode || mode == driver.ModeExclusive {
			return false
		}
	}
	return mode != driver.ModePermit || len(ahead) < limit
}

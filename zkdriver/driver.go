package zkdriver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// DefaultPrefix is the znode under which every lock name's node lives.
const DefaultPrefix = "/dlock"

// DefaultSessionTimeout is the session timeout Open asks the servers
// for: enough for dlock.DefaultTTL (see MaxTTL). ZooKeeper grants at most
// its maxSessionTimeout (20 ticks, 40 s with the default 2 s tick, and so
// a MaxTTL of 26.666 s): raise it on the servers for longer TTLs.
const DefaultSessionTimeout = 45 * time.Second

// MaxBatch is the most leases one Renew or Release call carries
// (Capabilities.MaxBatch): a Renew batch is one multi request.
const MaxBatch = 100

// MinTTL is the shortest lock TTL (Capabilities.MinTTL): ZooKeeper stamps
// modification times in whole milliseconds, and a lease much shorter
// than a few round trips to the leader would be over before it is used.
const MinTTL = 100 * time.Millisecond

// expiryMargin is Capabilities.ExpiryMargin: a node's expiry is judged
// by the leader's clock in whole milliseconds (mtime), against the
// holder's send time; 1 ms for the truncation and the rest for the
// clocks of the servers that lead one after the other (see docs).
const expiryMargin = 5 * time.Millisecond

// Driver implements driver.Driver and driver.Inspector on ZooKeeper. Make
// one with New; Open makes one that owns its connection, inside a dlock
// Client.
type Driver struct {
	conn           *zk.Conn
	prefix         string
	sessionTimeout time.Duration
	ownsConn       bool
	acl            []zk.ACL
	// plainCreates and plainReleases are set once the stamp node, or a
	// name's node, refused a write (see create and deleteOwn).
	plainCreates, plainReleases atomic.Bool

	mu       sync.Mutex
	paths    map[string]ownNode // acquisition id → its node, while held or waiting
	released releasedIDs        // ids released by this driver, for retries
	closed   bool

	sinks    grantSinks
	monitors sync.WaitGroup // grant monitors running

	closeOnce sync.Once
}

var (
	_ driver.Driver      = (*Driver)(nil)
	_ driver.Inspector   = (*Driver)(nil)
	_ driver.QueueLister = (*Driver)(nil)
)

// Option configures a Driver.
type Option func(*Driver) error

// WithPrefix sets the znode under which the driver keeps its nodes, an
// absolute path such as "/dlock" (DefaultPrefix). Drivers with different
// prefixes never see each other's locks.
func WithPrefix(prefix string) Option {
	return func(d *Driver) error {
		if err := zkPathOK(prefix); err != nil {
			return err
		}
		d.prefix = strings.TrimRight(prefix, "/")
		return nil
	}
}

// WithSessionTimeout tells New the session timeout the servers granted
// conn (go-zookeeper does not expose it): no lease may have a TTL above
// two thirds of it (see MaxTTL). New requires it: a timeout assumed
// longer than granted would let the servers expire the session, and free
// its locks, while their leases still count. Open learns it from the
// handshake.
func WithSessionTimeout(timeout time.Duration) Option {
	return func(d *Driver) error {
		if timeout <= 0 {
			return fmt.Errorf("%w: session timeout %v", driver.ErrInvalid, timeout)
		}
		d.sessionTimeout = timeout
		return nil
	}
}

func zkPathOK(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%w: prefix %q is not an absolute znode path such as /dlock", driver.ErrInvalid, p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("%w: prefix %q has a %q segment", driver.ErrInvalid, p, seg)
		}
	}
	return nil
}

// New makes a Driver on conn, a connection the caller keeps and closes
// after the Driver. WithSessionTimeout is required.
func New(conn *zk.Conn, opts ...Option) (*Driver, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: nil ZooKeeper connection", driver.ErrInvalid)
	}
	d := &Driver{
		conn:     conn,
		prefix:   DefaultPrefix,
		acl:      zk.WorldACL(zk.PermAll),
		paths:    make(map[string]ownNode),
		released: releasedIDs{at: make(map[string]time.Time)},
	}
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	if d.sessionTimeout == 0 {
		return nil, fmt.Errorf("%w: no WithSessionTimeout: New needs the session timeout the servers granted conn", driver.ErrInvalid)
	}
	return d, nil
}

// MaxTTL is the longest TTL a lease may have: two thirds of the session
// timeout. The servers may expire the session (and delete every node of
// it) a session timeout after the leader last heard of it; a request
// answered through a follower that loses the leader right after may never
// be reported to the leader, whose last news of the session can then be
// one client ping interval (a third of the timeout) older. A lease whose
// TTL fits in what is left ends, by dlock's validity deadline, before the
// session can.
func (d *Driver) MaxTTL() time.Duration {
	return (d.sessionTimeout * 2 / 3).Truncate(time.Millisecond) // a whole TTLUnit
}

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		TTLUnit:      time.Millisecond,
		MinTTL:       MinTTL,
		ExpiryMargin: expiryMargin,
		MaxBatch:     MaxBatch,
		// An uncontended queued acquisition costs what a plain one does:
		// a create, then the children and the node's stat together.
		QueueByDefault: true,
	}
}

func (d *Driver) checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > d.MaxTTL() {
		return fmt.Errorf("%w: TTL %v outside [%v, %v] (two thirds of the session timeout %v)", driver.ErrInvalid, ttl, MinTTL, d.MaxTTL(), d.sessionTimeout)
	}
	return nil
}

var errClosed = errors.New("zkdriver: driver closed")

// closeWait bounds how long Close of a Driver on a connection it does not
// own waits for its grant monitors: one blocked in a request to servers
// out of reach ends with that request, when the connection gives up on it
// or its owner closes it.
const closeWait = time.Second

// Close implements driver.Driver: it stops the grant monitors and closes
// the connection if Open made it, which ends the session and with it every
// node of the session, and ends the monitors' requests.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		for id, n := range d.paths {
			if n.stop != nil {
				close(n.stop)
				n.stop = nil
				d.paths[id] = n
			}
		}
		d.mu.Unlock()
		if d.ownsConn {
			d.conn.Close()
			d.monitors.Wait()
			return
		}
		done := make(chan struct{})
		go func() {
			d.monitors.Wait()
			close(done)
		}()
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	})
	return nil
}

func (d *Driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// ownNode is a node this driver made for an acquisition, with the data
// it wrote there.
type ownNode struct {
	path string
	key  string
	kind string // node kind: kindExclusive, kindShared or a permit kind
	data nodeData
	sent time.Time // when the last write that set its TTL was sent
	last written   // the last write of the node this driver saw answered
	// deleteSent is set when a delete of the node went out and its answer
	// was lost with the connection: a retry that finds the node gone
	// answers that it was released (Release).
	deleteSent bool
	inbox      string // where its grant is announced, while it waits
	// granted is set once the driver saw the waiter granted.
	granted bool
	// shared is set once the name was seen in use by others too (see
	// verdict.shared): only then does a release note itself.
	shared bool
	stop   chan struct{} // ends its grant monitor; nil when none runs
}

// written is one answered write of an own node: the leader's time stamp
// (mtime) of that write, and when this client had the answer. Only a
// stamp and an answer of the same write make a lower bound of the
// leader's clock (stamp + time since the answer): a stat read later may
// show a newer write (a renewal in flight) whose answer has not come yet.
type written struct {
	mtime    int64 // ms; 0 for a creation whose stamp is unknown: the node's ctime
	answered time.Time
}

// leaderNow is a lower bound of the leader's clock now, in ms: w's stamp
// plus the time since w's answer. When w is a creation whose stamp is
// unknown, the stamp is the node's ctime, from st, a stat of the node read
// since; st is not read otherwise, and may be nil then.
func (w written) leaderNow(st *zk.Stat) int64 {
	stamp := w.mtime
	if stamp == 0 {
		stamp = st.Ctime
	}
	return stamp + time.Since(w.answered).Milliseconds()
}

// remember records the node of an acquisition id.
func (d *Driver) remember(id string, n ownNode) {
	d.mu.Lock()
	if old, ok := d.paths[id]; ok && old.path == n.path {
		n.stop, n.granted, n.shared = old.stop, old.granted || n.granted, old.shared || n.shared
	}
	d.paths[id] = n
	d.mu.Unlock()
}

// update changes the remembered node of id, if any, with f.
func (d *Driver) update(id string, f func(*ownNode)) {
	d.mu.Lock()
	if n, ok := d.paths[id]; ok {
		f(&n)
		d.paths[id] = n
	}
	d.mu.Unlock()
}

func (d *Driver) pathOf(id string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.paths[id]
	return n.path, ok
}

func (d *Driver) nodeOf(id string) (ownNode, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.paths[id]
	return n, ok
}

// releasedKeep is how long the driver remembers a release it made, to
// answer its retries AlreadyReleased.
const releasedKeep = time.Minute

// releasedIDs are the ids of the releases a driver made in the last
// releasedKeep, and when. Each add drops the entries that aged out from
// the front of order, oldest first, so a release costs O(1) amortized,
// not a walk over every release of the last minute.
type releasedIDs struct {
	at    map[string]time.Time
	order []releasedID // as added: times never decrease along it
}

type releasedID struct {
	id string
	at time.Time
}

func (r *releasedIDs) add(id string, now time.Time) {
	r.at[id] = now
	r.order = append(r.order, releasedID{id, now})
	for len(r.order) > 0 && now.Sub(r.order[0].at) > releasedKeep {
		// An id added again since is kept, for its later time.
		if e := r.order[0]; r.at[e.id].Equal(e.at) {
			delete(r.at, e.id)
		}
		r.order = r.order[1:]
	}
}

func (d *Driver) forget(id string, released bool) {
	now := time.Now()
	d.mu.Lock()
	if n, ok := d.paths[id]; ok && n.stop != nil {
		close(n.stop)
	}
	delete(d.paths, id)
	if released {
		d.released.add(id, now)
	}
	d.mu.Unlock()
}

func (d *Driver) wasReleased(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.released.at[id]
	return ok
}

// isConnLoss reports errors after which a request may or may not have
// been applied: its reply was lost with the connection.
func isConnLoss(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionMoved) || errors.Is(err, zk.ErrNoServer)
}

// Package memdriver is an in-memory dlock driver with the semantics of a
// real store: locks expire by their TTL on an injectable clock, fencing
// tokens strictly increase per key, retried requests are recognised, and
// releases wake watchers from a goroutine of their own. Besides
// driver.Driver it implements driver.Inspector, driver.MultiAcquirer,
// driver.Queuer and driver.QueueLister, so every primitive of dlock runs
// on it: the fair lock, RWMutex, Semaphore and LockAll.
//
// It is meant for tests: applications can unit-test their locking code
// without a server (a Driver goes to dlock.New like any other), and the
// code above a driver (dlock's engine, or an application's own wrapper)
// can be tested against store failures with SetFault (the store fails or
// stalls before an operation) and SetFaultAfter (the store applied the
// operation but its reply was lost).
// Connect gives a second handle on the same store, as a second process
// would have; Snapshot and Restart simulate a store that restarts empty or
// from an older state.
//
// A Driver is its own store: nothing is shared between Drivers made by
// separate calls to New.
package memdriver

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockio/dlock/driver"
)

// ErrClosed is returned by every operation of a Driver after its Close, and
// by the Watchers it made.
var ErrClosed = errors.New("memdriver: driver closed")

// DefaultCapabilities returns what a Driver reports and enforces unless
// WithCapabilities says otherwise: TTLUnit and MinTTL 1 ms, ExpiryMargin 0,
// MaxBatch 1000, ContextAware. The store keeps time to the nanosecond; a
// unit of 1 ms keeps TTLs in the shape a Redis store needs, so code tested
// here sends what it will send in production.
func DefaultCapabilities() driver.Capabilities {
	return driver.Capabilities{
		TTLUnit:        time.Millisecond,
		MinTTL:         time.Millisecond,
		ExpiryMargin:   0,
		MaxBatch:       1000,
		ContextAware:   true,
		QueueByDefault: true, // as the Redis driver, so that tests see what production does
	}
}

// Driver implements driver.Driver and driver.Inspector in memory. Every
// method is safe for concurrent use.
type Driver struct {
	s          *store
	fault      atomic.Pointer[Fault]
	faultAfter atomic.Pointer[Fault]

	// mu guards watchers and the transition of closed to true, so that a
	// Watch racing Close never leaves a watcher goroutine running.
	mu       sync.Mutex
	closed   atomic.Bool
	watchers map[*watcher]struct{}
	grants   map[*grantWatcher]struct{} // made by WatchGrants, closed by Close
}

var (
	_ driver.Driver    = (*Driver)(nil)
	_ driver.Inspector = (*Driver)(nil)
)

// Option configures a Driver made by New.
type Option func(*options)

type options struct {
	now  func() time.Time
	caps driver.Capabilities
}

// WithClock makes the store read time from now instead of time.Now, so a
// test can move time by hand: a lock expires once now() reaches its
// acquisition (or last renewal) time plus its TTL. now is called with the
// store's lock held, so it must not call the Driver. A nil now keeps
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithCapabilities replaces DefaultCapabilities, for tests of code that
// must adapt to other stores (a small MaxBatch, a coarse TTLUnit). The store enforces
// TTLUnit, MinTTL and MaxBatch (requests outside them fail with an error
// matching driver.ErrInvalid) and expires every lock ExpiryMargin before
// its TTL, the earliest the capabilities allow, so that code which ignores
// the margin fails its tests. ContextAware is only reported: the store
// honours ctx either way. Unusable capabilities (TTLUnit <= 0, MinTTL <
// TTLUnit, ExpiryMargin < 0 or >= MinTTL, MaxBatch <= 0) make every
// operation fail with an error matching driver.ErrInvalid, and dlock.New
// refuses the driver.
func WithCapabilities(c driver.Capabilities) Option {
	return func(o *options) { o.caps = c }
}

// New returns a Driver on a new, empty store. Nil options are ignored.
func New(opts ...Option) *Driver {
	o := options{now: time.Now, caps: DefaultCapabilities()}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	s := newStore(o.now, o.caps)
	if c := o.caps; c.TTLUnit <= 0 || c.MinTTL < c.TTLUnit || c.ExpiryMargin < 0 || c.ExpiryMargin >= c.MinTTL || c.MaxBatch <= 0 {
		s.unusable = fmt.Errorf("%w: memdriver: unusable capabilities %+v", driver.ErrInvalid, c)
	}
	return newHandle(s)
}

func newHandle(s *store) *Driver {
	return &Driver{s: s, watchers: make(map[*watcher]struct{}), grants: make(map[*grantWatcher]struct{})}
}

// Connect returns another Driver on d's store, as a second process
// connecting to the same server gets: locks, tokens and release
// notifications are shared; fault hooks and Close are its own. Tests use it
// to give two dlock clients one store, or to fail one client's connection
// while the other's works.
func (d *Driver) Connect() *Driver { return newHandle(d.s) }

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.s.caps }

// Close implements driver.Driver. It closes the Watchers and grant
// watchers made by d; after
// it, d's operations return ErrClosed. The store and the other handles on
// it (see Connect) keep working. Close is idempotent and returns nil.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed.Store(true)
	ws, gs := d.watchers, d.grants
	d.watchers, d.grants = nil, nil
	d.mu.Unlock()
	for w := range ws {
		w.Close()
	}
	for g := range gs {
		g.Close()
	}
	return nil
}

// store is the state shared by the handles of one store.
type store struct {
	now  func() time.Time
	caps driver.Capabilities

	mu       sync.Mutex
	locks    map[string]lockState
	released map[releasedKey]time.Time
	// last is the latest fencing token issued, for all keys together. One
	// counter for the whole store gives every key strictly increasing
	// tokens without any per-key state outliving its lock: memory stays
	// bounded by the live locks, and a restart that loses the locks (see
	// Restart) has no per-key counters to lose with them.
	last     uint64
	watchers map[*watcher]struct{}
	// queues holds the queued side of names (queue.go); qreleased the
	// releases of queued leases, for retries; inboxes the grant watchers.
	queues    map[string]*queueState
	qreleased map[queueLease]time.Time
	inboxes   map[string]map[*grantWatcher]struct{}
	// untilSweep counts operations until expired entries are swept.
	untilSweep int
	unusable   error // set by New for unusable capabilities: every operation fails
}

// lockState is a held lock.
type lockState struct {
	id      string
	token   uint64
	owner   driver.Owner
	since   time.Time
	expires time.Time
}

// releasedKey names the remembered release of one lock by one owner, so
// that a retry of that release can be told apart from a release by a
// stranger, also after later holders released the lock too. Like the
// records a Redis store keeps, each lasts only for the remaining TTL of
// the released lock (the map's value): memory stays bounded by the TTLs,
// and a retry later than that gets NotHeld, which is what it would have
// got for an expired lock.
type releasedKey struct{ key, id string }

func newStore(now func() time.Time, caps driver.Capabilities) *store {
	return &store{
		now:       now,
		caps:      caps,
		locks:     make(map[string]lockState),
		released:  make(map[releasedKey]time.Time),
		watchers:  make(map[*watcher]struct{}),
		queues:    make(map[string]*queueState),
		qreleased: make(map[queueLease]time.Time),
		inboxes:   make(map[string]map[*grantWatcher]struct{}),
	}
}

// expiresAt is when a lock given ttl at now expires: ExpiryMargin early,
// the earliest the store's capabilities allow.
func (s *store) expiresAt(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl - s.caps.ExpiryMargin)
}

// live returns key's lock if it is held at now. Expiry is lazy: an expired
// lock is deleted when it is next looked at (and by sweep), and, as in
// Redis, nobody is notified.
func (s *store) live(key string, now time.Time) (lockState, bool) {
	l, ok := s.locks[key]
	if ok && !now.Before(l.expires) {
		delete(s.locks, key)
		return lockState{}, false
	}
	return l, ok
}

// releasedBy reports whether id's release of key is remembered at now.
func (s *store) releasedBy(key, id string, now time.Time) bool {
	rk := releasedKey{key, id}
	exp, ok := s.released[rk]
	if ok && !now.Before(exp) {
		delete(s.released, rk)
		return false
	}
	return ok
}

// tick counts one operation and, every so many, deletes every expired
// entry. The period grows with the number of entries, so the cost is
// constant per operation while keys that are never looked at again still
// go away.
func (s *store) tick(now time.Time) {
	if s.untilSweep--; s.untilSweep > 0 {
		return
	}
	for k, l := range s.locks {
		if !now.Before(l.expires) {
			delete(s.locks, k)
		}
	}
	for k, exp := range s.released {
		if !now.Before(exp) {
			delete(s.released, k)
		}
	}
	for k, exp := range s.qreleased {
		if !now.Before(exp) {
			delete(s.qreleased, k)
		}
	}
	for k := range s.queues {
		s.settle(k, now)
	}
	s.untilSweep = len(s.locks) + len(s.released) + len(s.qreleased) + len(s.queues) + 64
}

// notify queues key for every watcher following it. It only appends to
// queues, so a release never waits for a callback.
func (s *store) notify(key string) {
	for w := range s.watchers {
		if w.keys[key] > 0 {
			w.push(key)
		}
	}
}

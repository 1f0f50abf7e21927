package etcddriver

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leasePool keeps one etcd lease per TTL for the locks of one Driver: the
// keys of every lock with that TTL are attached to it, so renewing a
// thousand locks costs one keep-alive, and a crashed process's locks all
// expire together, one TTL after its last keep-alive.
type leasePool struct {
	cli *clientv3.Client

	mu     sync.Mutex
	byTTL  map[int64]*poolLease
	closed bool
}

// keepAliveReuse is how long before a call started a keep-alive of a pool
// lease may have been sent and still serve that call, instead of one of
// its own: an acquisition puts its key on the lease, which lasts its TTL
// from the keep-alive, so such a key may expire up to keepAliveReuse
// earlier than its TTL after the acquisition was sent. The driver reports
// it as Capabilities.ExpiryMargin, and the engine's validity deadline
// subtracts it: no holder relies on the lost part. In exchange,
// acquisitions in a steady stream send one keep-alive per keepAliveReuse
// between them, not one each, so an uncontended cycle is two requests
// (the acquiring and the releasing Txn). The lease's etcd TTL stays the
// lock's TTL, so a crashed holder's lock is still free one TTL after its
// last keep-alive. Half a second keeps the engine's shortest TTL at
// etcd's 2 s (engine.MinTTL needs the margin under about 0.98 s) and
// costs a 30 s lock under 2% of its validity.
const keepAliveReuse = 500 * time.Millisecond

// poolLease is one lease, or a grant in progress (ready not yet closed).
type poolLease struct {
	ttl   int64 // seconds
	ready chan struct{}
	err   error // of the grant, once ready
	id    clientv3.LeaseID

	mu       sync.Mutex
	lastOK   time.Time // when the last successful grant or keep-alive was sent
	inflight int       // keep-alives sent and not answered yet
	pending  *kaCall   // the keep-alive sent last, while unanswered
	dead     bool      // revoked by runOut: keep-alives fail at once
}

// kaCall is one keep-alive in flight, which calls that need one sent no
// earlier than sent can wait for instead of sending their own.
type kaCall struct {
	sent time.Time
	done chan struct{}
	ok   bool // once done: the lease lives with its full TTL
	err  error
}

// alive reports whether the lease is surely still alive at now by our
// clock: its last successful keep-alive was sent less than its TTL ago
// (less a second of slack for a keep-alive that etcd took long to apply).
func (l *poolLease) alive(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.lastOK.Add(time.Duration(l.ttl)*time.Second - time.Second))
}

// sentSince reports whether a grant or keep-alive of the lease that was
// sent at or after t succeeded: the lease then lasts a full TTL from t.
func (l *poolLease) sentSince(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lastOK.Before(t)
}

// freshFor reports whether a keep-alive of the lease recent enough for a
// call that started at start succeeded (see keepAliveReuse).
func (l *poolLease) freshFor(start time.Time) bool {
	return l.sentSince(start.Add(-keepAliveReuse))
}

func (l *poolLease) kept(sent time.Time) {
	l.mu.Lock()
	if sent.After(l.lastOK) {
		l.lastOK = sent
	}
	l.mu.Unlock()
}

func newLeasePool(cli *clientv3.Client) *leasePool {
	return &leasePool{cli: cli, byTTL: make(map[int64]*poolLease)}
}

var errDriverClosed = errors.New("etcd driver closed")

// get returns the lease for ttl seconds, granting one if there is none or
// the one there may have expired. Concurrent callers share one grant.
func (p *leasePool) get(ctx context.Context, ttl int64) (*poolLease, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errDriverClosed
		}
		l := p.byTTL[ttl]
		if l == nil {
			p.pruneLocked(time.Now())
			l = &poolLease{ttl: ttl, ready: make(chan struct{})}
			p.byTTL[ttl] = l
			p.mu.Unlock()
			p.grant(ctx, l)
			if l.err != nil {
				return nil, l.err
			}
			return l, nil
		}
		p.mu.Unlock()
		select {
		case <-l.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if l.err == nil && l.alive(time.Now()) {
			return l, nil
		}
		p.drop(l) // failed grant or expired: the next round grants anew
	}
}

func (p *leasePool) grant(ctx context.Context, l *poolLease) {
	defer close(l.ready)
	sent := time.Now()
	resp, err := p.cli.Grant(ctx, l.ttl)
	if err != nil {
		l.err = err
		return
	}
	l.id = resp.ID
	l.lastOK = sent
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		// Close ran during the grant and did not see this lease.
		_, _ = p.cli.Revoke(context.WithoutCancel(ctx), resp.ID)
		l.err = errDriverClosed
	}
}

// pruneLocked forgets leases that have surely expired, so that a program
// using many different TTLs over time does not accumulate them.
func (p *leasePool) pruneLocked(now time.Time) {
	for ttl, l := range p.byTTL {
		select {
		case <-l.ready:
			if l.err != nil || !l.alive(now) {
				delete(p.byTTL, ttl)
			}
		default:
		}
	}
}

// drop forgets l, if it is still the pool's lease for its TTL.
func (p *leasePool) drop(l *poolLease) {
	p.mu.Lock()
	if p.byTTL[l.ttl] == l {
		delete(p.byTTL, l.ttl)
	}
	p.mu.Unlock()
}

// byID returns the pool's lease with that id, if any.
func (p *leasePool) byID(id clientv3.LeaseID) *poolLease {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.byTTL {
		select {
		case <-l.ready:
			if l.err == nil && l.id == id {
				return l
			}
		default:
		}
	}
	return nil
}

// freshen makes sure that what a call that started at start puts on l
// lasts until keepAliveReuse less than a TTL after start, without
// delaying the call's own request: unless l is fresh for start already,
// it sends a keep-alive (or joins one in flight, sent recently enough) on
// a goroutine of its own. wait returns that keep-alive's outcome:
// errLeaseLost if the lease is gone.
func (p *leasePool) freshen(ctx context.Context, l *poolLease, start time.Time) (wait func() error) {
	if l.freshFor(start) {
		return func() error { return nil }
	}
	ch := make(chan error, 1)
	go func() { ch <- p.refresh(ctx, l, start) }()
	return func() error { return <-ch }
}

// refresh makes l fresh for a call that started at start: a keep-alive in
// flight sent since start less keepAliveReuse is waited for, else one is
// sent. Calls in a burst thus share one keep-alive.
func (p *leasePool) refresh(ctx context.Context, l *poolLease, start time.Time) error {
	since := start.Add(-keepAliveReuse)
	l.mu.Lock()
	c := l.pending
	fresh := !l.lastOK.Before(since)
	l.mu.Unlock()
	if fresh {
		return nil
	}
	if c != nil && !c.sent.Before(since) {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.err == nil && c.ok {
			return nil
		}
		if c.err == nil {
			return errLeaseLost
		}
		// It failed, perhaps only for its sender's ctx: send our own.
	}
	ok, err := p.keepAlive(ctx, l.id, l.ttl)
	if err == nil && !ok {
		err = errLeaseLost
	}
	return err
}

// keepAlive sends one keep-alive for id and reports whether the lease is
// alive with a TTL of at least ttl seconds. The send time is recorded for
// the pool's lease of that id, and the call is its pending one meanwhile.
func (p *leasePool) keepAlive(ctx context.Context, id clientv3.LeaseID, ttl int64) (ok bool, err error) {
	c := &kaCall{sent: time.Now(), done: make(chan struct{})}
	if l := p.byID(id); l != nil {
		l.mu.Lock()
		if l.dead {
			l.mu.Unlock()
			return false, nil
		}
		l.inflight++
		l.pending = c
		l.mu.Unlock()
		defer func() {
			c.ok, c.err = ok, err
			l.mu.Lock()
			l.inflight--
			if l.pending == c {
				l.pending = nil
			}
			l.mu.Unlock()
			close(c.done)
		}()
	}
	resp, err := p.cli.KeepAliveOnce(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		if l := p.byID(id); l != nil {
			p.drop(l)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if l := p.byID(id); l != nil {
		l.kept(c.sent)
	}
	return resp.TTL >= ttl, nil
}

// runOut revokes id if it is one of the pool's leases and has run out by
// this process's clock: no keep-alive sent within its TTL succeeded and
// none is in flight. Every lock on it is then past the deadline its holder
// computed (from before the keep-alive), so none is relied on; etcd itself
// deletes the keys of an expired lease only at its next expiry check (every
// 500 ms) and a Raft round later. It reports whether it revoked.
func (p *leasePool) runOut(ctx context.Context, id clientv3.LeaseID) bool {
	l := p.byID(id)
	if l == nil {
		return false
	}
	l.mu.Lock()
	if l.dead || l.inflight > 0 || !time.Now().After(l.lastOK.Add(time.Duration(l.ttl)*time.Second)) {
		l.mu.Unlock()
		return false
	}
	l.dead = true
	l.mu.Unlock()
	p.drop(l)
	_, err := p.cli.Revoke(ctx, id)
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// revokeAll revokes every lease of the pool (deleting the keys attached
// to them) and makes later gets fail.
func (p *leasePool) revokeAll(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	leases := p.byTTL
	p.byTTL = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() {
			select {
			case <-l.ready:
			case <-ctx.Done():
				return
			}
			if l.err == nil {
				_, _ = p.cli.Revoke(ctx, l.id)
			}
		})
	}
	wg.Wait()
}

// markerTTL is how long the marker lease lives; release markers are
// written to it only during its first half, so each lives 5 to 10 s:
// long enough for a retry after a lost reply, short enough to cost nothing.
const markerTTL = 10

// markerLease is the lease release markers are attached to. It is never
// kept alive: a new one is granted when the current one is past half its
// life.
type markerLease struct {
	cli *clientv3.Client

	mu      sync.Mutex
	id      clientv3.LeaseID
	granted time.Time
	// granting is closed when the Grant in flight ends; nil when none is.
	// Other callers wait for it under their own ctx, not under mu: a
	// Grant stalled on a frozen store must not hold every release past
	// its caller's ctx.
	granting chan struct{}
	closed   bool
}

// get returns a lease with at least markerTTL/2 seconds left, or the error
// that kept it from granting one: the Grant's, ctx's, or errDriverClosed.
func (m *markerLease) get(ctx context.Context) (clientv3.LeaseID, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return 0, errDriverClosed
		}
		if m.id != 0 && time.Since(m.granted) < markerTTL*time.Second/2 {
			id := m.id
			m.mu.Unlock()
			return id, nil
		}
		if wait := m.granting; wait != nil {
			m.mu.Unlock()
			select {
			case <-wait:
				continue // granted, or failed: then this call tries itself
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		done := make(chan struct{})
		m.granting = done
		m.mu.Unlock()
		sent := time.Now()
		resp, err := m.cli.Grant(ctx, markerTTL)
		m.mu.Lock()
		m.granting = nil
		closed := m.closed
		if err == nil && !closed {
			m.id, m.granted = resp.ID, sent
		}
		m.mu.Unlock()
		close(done)
		switch {
		case err != nil:
			return 0, err
		case closed: // Close came during the Grant: its lease is not to outlive the driver
			_, _ = m.cli.Revoke(ctx, resp.ID)
			return 0, errDriverClosed
		}
		return resp.ID, nil
	}
}

// revoke revokes the current marker lease, deleting the markers on it, and
// makes later gets return 0. Only Close calls it: after it no release of
// this driver can be retried, so the markers have nothing left to answer.
func (m *markerLease) revoke(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	id := m.id
	m.id = 0
	m.mu.Unlock()
	if id != 0 {
		_, _ = m.cli.Revoke(ctx, id)
	}
}

// forget drops a marker lease etcd says is gone.
func (m *markerLease) forget(id clientv3.LeaseID) {
	m.mu.Lock()
	if m.id == id {
		m.id = 0
	}
	m.mu.Unlock()
}

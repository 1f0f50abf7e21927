package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/fence"
	"github.com/dlockio/dlock/fence/redisfence"
	"github.com/dlockio/dlock/once"
	"github.com/redis/go-redis/v9"
)

// outcome is how one instance's handling of a delivery ended.
type outcome int

const (
	skipped outcome = iota // its lease ended before it could charge: the delivery is retried
	found                  // the order was already charged
	charged                // its charge was accepted
	refused                // the store refused its charge (stale token)
)

// replay runs the incident on one order with two fresh instances: A takes
// the first delivery and freezes before its charge, B the redelivery.
func (r *incidentRun) replay(ctx context.Context, order string) error {
	a, err := r.newInstance("A")
	if err != nil {
		return err
	}
	defer a.lock.close()
	b, err := r.newInstance("B")
	if err != nil {
		return err
	}
	defer b.lock.close()
	rp := &replayPair{r: r, order: order, a: a, b: b, aHolds: make(chan struct{}), bDone: make(chan struct{})}
	go rp.runB(ctx)
	aOut, err := rp.runA(ctx)
	rp.letBGo() // in case A never reached its pause
	<-rp.bDone
	if err != nil {
		return err
	}
	if rp.bErr != nil {
		return rp.bErr
	}
	switch {
	case aOut == refused:
		r.count(func(c *IncidentColumn) { c.StaleRejected++ })
	case aOut == charged && rp.bFirst:
		r.p.printf("%s: %s: A woke up and charged the order again", r.label, order)
		r.count(func(c *IncidentColumn) { c.StaleAccepted++ })
	}
	if err := r.tally(ctx, a, order); err != nil {
		return err
	}
	return r.removeOrder(ctx, b, order)
}

// replayPair is one replay's two instances and the hand-offs between
// them: B's delivery arrives once A holds the lock (aHolds), and A thaws
// once B is done (bDone, after which bOut and bErr are B's results).
type replayPair struct {
	r      *incidentRun
	order  string
	a, b   *incidentInstance
	aHolds chan struct{}
	once   sync.Once
	bDone  chan struct{}
	bOut   outcome
	bErr   error
	bFirst bool // B charged before A thawed; A's goroutine only
}

// letBGo lets B's delivery arrive; it may be called more than once.
func (rp *replayPair) letBGo() { rp.once.Do(func() { close(rp.aHolds) }) }

// runB is B's side: the redelivery, once A holds the lock.
func (rp *replayPair) runB(ctx context.Context) {
	defer close(rp.bDone)
	select {
	case <-rp.aHolds:
	case <-ctx.Done():
		rp.bErr = ctx.Err()
		return
	}
	// A redelivery whose handler lost its own lease on the way (a slow
	// machine) is delivered again.
	for range 5 {
		if rp.bOut, rp.bErr = rp.r.process(ctx, rp.b, rp.order, nil); rp.bErr != nil || rp.bOut != skipped {
			return
		}
	}
}

// runA is A's side: the first delivery, which freezes before its charge.
// A too retries a delivery whose lease it lost before its pause (on a
// slow machine); B waits for A's pause meanwhile.
func (rp *replayPair) runA(ctx context.Context) (out outcome, err error) {
	pause := func(lease *dlock.Lease) { rp.pause(ctx, lease) }
	for range 5 {
		if out, err = rp.r.process(ctx, rp.a, rp.order, pause); err != nil || out != skipped {
			break
		}
	}
	return out, err
}

// pause is A's freeze, like a stop-the-world pause: no renewal gets out,
// so the lock expires in Redis and B takes over. A thaws once B is done
// (or after a bound, if B never could).
func (rp *replayPair) pause(ctx context.Context, lease *dlock.Lease) {
	r := rp.r
	rp.letBGo()
	r.count(func(c *IncidentColumn) { c.Paused++ })
	r.p.printf("%s: %s: A freezes right before its charge (token %d)", r.label, rp.order, lease.Token())
	freezeUntil(ctx, rp.a.gate, rp.bDone, 20*r.ttl)
	select {
	case <-rp.bDone:
		rp.bFirst = rp.bOut == charged
	default:
	}
}

// tally counts what the store ended up with for order: the charges, and
// the completion record of the strategies that keep one.
func (r *incidentRun) tally(ctx context.Context, in *incidentInstance, order string) error {
	n, err := in.store.(chargeCounter).charges(ctx, order)
	if err != nil {
		return err
	}
	if rc, ok := in.store.(recordChecker); ok {
		stored, err := rc.completed(ctx, order)
		if err != nil {
			return err
		}
		if stored {
			r.count(func(c *IncidentColumn) { c.Records++ })
		}
	}
	r.count(func(c *IncidentColumn) {
		if n > 0 {
			c.Charged++
		}
		if n > 1 {
			c.ChargedTwice++
		}
	})
	return nil
}

// removeOrder removes the order's keys, its fence key included (its name
// does not start with the run's prefix, so Run's clean-up would miss it).
func (r *incidentRun) removeOrder(ctx context.Context, in *incidentInstance, order string) error {
	key := lockOnlyStore{prefix: r.prefix}.key(order)
	fk, err := redisfence.FenceKey(key)
	if err != nil {
		return err
	}
	return in.rdb.Del(ctx, key, fk).Err()
}

// process is an instance's handling of one delivery: lock, check, work,
// check the lease, (pause), charge, unlock. The charge carries the token;
// what the store does with it is the strategy's business.
func (r *incidentRun) process(ctx context.Context, in *incidentInstance, order string, pause func(*dlock.Lease)) (outcome, error) {
	lease, err := in.lock.c.Lock(ctx, order, dlock.WithTTL(r.ttl))
	if err != nil {
		return skipped, err
	}
	defer func() { _ = lease.Unlock(context.WithoutCancel(ctx)) }()
	tok := lease.Token()
	done, err := in.store.processed(ctx, order, tok)
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		return refused, nil
	case err != nil:
		return skipped, err
	case done:
		return found, nil
	}
	if !sleep(lease.Context(), r.ttl/8) || lease.Err() != nil { // the work, then the check every holder makes
		return skipped, nil
	}
	if pause != nil {
		pause(lease)
	}
	err = in.store.charge(ctx, order, tok)
	if errors.Is(lease.Err(), dlock.ErrLockLost) {
		r.count(func(c *IncidentColumn) { c.LeasesLost++ })
	}
	switch {
	case errors.Is(err, fence.ErrStaleToken):
		r.p.printf("%s: %s: the store refused %s's stale charge: %v", r.label, order, in.name, err)
		if errors.Is(err, once.ErrClaimLost) {
			r.count(func(c *IncidentColumn) { c.StaleRecordsRefused++ })
		}
		return refused, nil
	case err != nil:
		return skipped, err
	}
	return charged, nil
}

func (r *incidentRun) count(f func(*IncidentColumn)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.col)
}

// freezeUntil freezes g's traffic and the caller until thaw is closed, at
// most for limit (and no longer than ctx).
func freezeUntil(ctx context.Context, g *gate, thaw <-chan struct{}, limit time.Duration) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.thawed = ch
	g.mu.Unlock()
	t := time.NewTimer(limit)
	select {
	case <-thaw:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	g.mu.Lock()
	g.thawed = nil
	g.mu.Unlock()
	close(ch)
}

// chargeCounter reads the ground truth: how often an order was charged.
type chargeCounter interface {
	charges(ctx context.Context, order string) (int, error)
}

// lockOnlyStore trusts the lock: it checks and charges without a token.
type lockOnlyStore struct {
	rdb    redis.UniversalClient
	prefix string
}

func newLockOnlyStore(in *incidentInstance) (incidentStore, error) {
	return &lockOnlyStore{rdb: in.rdb, prefix: in.prefix}, nil
}

func (s lockOnlyStore) key(order string) string { return s.prefix + "charges:" + order }

func (s *lockOnlyStore) processed(ctx context.Context, order string, _ fence.Token) (bool, error) {
	n, err := s.charges(ctx, order)
	return n > 0, err
}

func (s *lockOnlyStore) charge(ctx context.Context, order string, _ fence.Token) error {
	return s.rdb.Incr(ctx, s.key(order)).Err()
}

func (s *lockOnlyStore) charges(ctx context.Context, order string) (int, error) {
	v, err := s.rdb.Get(ctx, s.key(order)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// fencedStore makes every access through redisfence: the read registers
// the token, and a charge with a token below the highest seen is refused.
type fencedStore struct {
	lockOnlyStore
	f *redisfence.Client
}

func newFencedStore(in *incidentInstance) (incidentStore, error) {
	f, err := redisfence.New(in.rdb)
	if err != nil {
		return nil, err
	}
	return &fencedStore{lockOnlyStore: lockOnlyStore{rdb: in.rdb, prefix: in.prefix}, f: f}, nil
}

func (s *fencedStore) processed(ctx context.Context, order string, tok fence.Token) (bool, error) {
	v, err := s.f.Get(ctx, s.key(order), tok)
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return v != "" && v != "0", nil
}

func (s *fencedStore) charge(ctx context.Context, order string, tok fence.Token) error {
	_, err := s.f.IncrBy(ctx, s.key(order), tok, 1)
	if err != nil && !errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("fenced charge: %w", err)
	}
	return err
}

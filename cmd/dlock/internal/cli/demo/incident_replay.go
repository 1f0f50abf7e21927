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

	aHolds := make(chan struct{}) // A has the lock: B's delivery arrives
	var holdsOnce sync.Once
	letBGo := func() { holdsOnce.Do(func() { close(aHolds) }) }
	bDone := make(chan struct{}) // B is done (bOut is set): A may wake up
	var bOut outcome
	var bErr error
	go func() {
		defer close(bDone)
		select {
		case <-aHolds:
		case <-ctx.Done():
			bErr = ctx.Err()
			return
		}
		// A redelivery whose handler lost its own lease on the way (a slow
		// machine) is delivered again.
		for range 5 {
			if bOut, bErr = r.process(ctx, b, order, nil); bErr != nil || bOut != skipped {
				return
			}
		}
	}()
	bFirst := false
	pause := func(lease *dlock.Lease) {
		letBGo()
		// Frozen like a stop-the-world pause: no renewal gets out, so the
		// lock expires in Redis and B takes over. A thaws once B is done
		// (or after a bound, if B never could).
		r.count(func(c *IncidentColumn) { c.Paused++ })
		r.p.printf("%s: %s: A freezes right before its charge (token %d)", r.label, order, lease.Token())
		freezeUntil(ctx, a.gate, bDone, 20*r.ttl)
		select {
		case <-bDone:
			bFirst = bOut == charged
		default:
		}
	}
	// A too retries a delivery whose lease it lost before its pause (on a
	// slow machine); B waits for A's pause meanwhile.
	var aOut outcome
	for range 5 {
		if aOut, err = r.process(ctx, a, order, pause); err != nil || aOut != skipped {
			break
		}
	}
	letBGo() // in case A never reached its pause
	<-bDone
	if err != nil {
		return err
	}
	if bErr != nil {
		return bErr
	}
	switch {
	case aOut == refused:
		r.count(func(c *IncidentColumn) { c.StaleRejected++ })
	case aOut == charged && bFirst:
		r.p.printf("%s: %s: A woke up and charged the order again", r.label, order)
		r.count(func(c *IncidentColumn) { c.StaleAccepted++ })
	}
	n, err := a.store.(chargeCounter).charges(ctx, order)
	if err != nil {
		return err
	}
	if rc, ok := a.store.(recordChecker); ok {
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
	// Remove the order's keys, its fence key included (its name does not
	// start with the run's prefix, so Run's clean-up would miss it).
	key := lockOnlyStore{prefix: r.prefix}.key(order)
	fk, err := redisfence.FenceKey(key)
	if err != nil {
		return err
	}
	return b.rdb.Del(ctx, key, fk).Err()
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

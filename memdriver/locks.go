package memdriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlockio/dlock/driver"
)

// Acquire implements driver.Driver. A free (or expired) lock is taken with
// the next token; tokens start at 1 and count the acquisitions of all keys
// of the store together, so a test can predict them. A lock is free from
// the instant its TTL has run out. A lock already held by req.ID is reported acquired with
// its token and its TTL left as it is, as a retried request must be. A
// lock held by another ID is reported busy with RetryAfter set to its
// remaining TTL, whether or not req.Waiting is set.
func (d *Driver) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	if err := d.s.checkLease(req.Key, req.ID, req.TTL); err != nil {
		return driver.AcquireResult{}, err
	}
	return run(ctx, d, OpAcquire, func(s *store, now time.Time) (driver.AcquireResult, error) {
		s.tick(now)
		s.settle(req.Key, now) // an expiry may have granted a waiter
		if l, ok := s.live(req.Key, now); ok {
			if l.id == req.ID {
				return driver.AcquireResult{Acquired: true, Token: l.token}, nil
			}
			// live guarantees now < expires; max only guards a clock that
			// was moved back, which cannot make the lock expire earlier.
			return driver.AcquireResult{RetryAfter: max(l.expires.Sub(now), 0)}, nil
		}
		if retry, busy := s.busy(req.Key, now); busy {
			// Queued leases of the name: taking it would jump the queue.
			return driver.AcquireResult{RetryAfter: retry}, nil
		}
		s.last++
		s.locks[req.Key] = lockState{
			id:      req.ID,
			token:   s.last,
			owner:   req.Owner,
			since:   now,
			expires: s.expiresAt(now, req.TTL),
		}
		return driver.AcquireResult{Acquired: true, Token: s.last}, nil
	})
}

// Release implements driver.Driver. Each request is applied in order, so a
// batch naming the same lock twice gets Released then AlreadyReleased.
// Every Released lock wakes the watchers following its key. The release is
// remembered for the lock's remaining TTL, during which a retry by the same
// ID gets AlreadyReleased, even if someone else has taken the lock since
// (the earlier release did succeed).
func (d *Driver) Release(ctx context.Context, reqs []driver.ReleaseRequest) ([]driver.ReleaseResult, error) {
	if err := d.s.checkBatch(len(reqs)); err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if err := r.Kind.Check(); err != nil {
			return nil, err
		}
		if err := checkKeyID(r.Key, r.ID); err != nil {
			return nil, err
		}
	}
	return run(ctx, d, OpRelease, func(s *store, now time.Time) ([]driver.ReleaseResult, error) {
		s.tick(now)
		results := make([]driver.ReleaseResult, len(reqs))
		for i, r := range reqs {
			if r.Kind == driver.KindLock {
				results[i] = s.release(r, now)
			} else {
				results[i] = s.releaseQueued(r, now)
			}
		}
		return results, nil
	})
}

func (s *store) release(r driver.ReleaseRequest, now time.Time) driver.ReleaseResult {
	if l, ok := s.live(r.Key, now); ok && l.id == r.ID {
		delete(s.locks, r.Key)
		s.released[releasedKey{r.Key, r.ID}] = l.expires
		s.notify(r.Key)
		s.settle(r.Key, now) // hand off to the queue's head, if any
		return driver.Released
	}
	if s.releasedBy(r.Key, r.ID, now) {
		return driver.AlreadyReleased
	}
	return driver.NotHeld
}

// Renew implements driver.Driver: every lease still held by its ID gets
// its TTL set to the request's TTL from now.
func (d *Driver) Renew(ctx context.Context, reqs []driver.RenewRequest) ([]bool, error) {
	if err := d.s.checkBatch(len(reqs)); err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if err := r.Kind.Check(); err != nil {
			return nil, err
		}
		if err := d.s.checkLease(r.Key, r.ID, r.TTL); err != nil {
			return nil, err
		}
	}
	return run(ctx, d, OpRenew, func(s *store, now time.Time) ([]bool, error) {
		held := make([]bool, len(reqs))
		for i, r := range reqs {
			if r.Kind != driver.KindLock {
				held[i] = s.renewQueued(r, now)
				continue
			}
			l, ok := s.live(r.Key, now)
			if !ok || l.id != r.ID {
				continue
			}
			l.expires = s.expiresAt(now, r.TTL)
			s.locks[r.Key] = l
			held[i] = true
		}
		return held, nil
	})
}

// Inspect implements driver.Inspector. Since is the store's clock at the
// acquisition; TTL is the time left before the lock expires.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	if err := checkKey(key); err != nil {
		return driver.LockInfo{}, false, err
	}
	type result struct {
		info driver.LockInfo
		ok   bool
	}
	r, err := run(ctx, d, OpInspect, func(s *store, now time.Time) (result, error) {
		l, ok := s.live(key, now)
		if !ok {
			return result{}, nil
		}
		return result{l.info(key, now), true}, nil
	})
	return r.info, r.ok, err
}

// List implements driver.Inspector. The locks are sorted by key.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	return run(ctx, d, OpList, func(s *store, now time.Time) ([]driver.LockInfo, error) {
		infos := []driver.LockInfo{}
		for k, l := range s.locks {
			if strings.HasPrefix(k, prefix) && now.Before(l.expires) {
				infos = append(infos, l.info(k, now))
			}
		}
		slices.SortFunc(infos, func(a, b driver.LockInfo) int { return strings.Compare(a.Key, b.Key) })
		return infos, nil
	})
}

// ForceRelease implements driver.Inspector. It wakes the watchers of key
// like a release, but records no release: the broken holder's own release
// gets NotHeld.
func (d *Driver) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	if err := checkKey(key); err != nil {
		return 0, false, err
	}
	type result struct {
		token uint64
		ok    bool
	}
	r, err := run(ctx, d, OpForceRelease, func(s *store, now time.Time) (result, error) {
		l, ok := s.live(key, now)
		if !ok {
			return result{}, nil
		}
		delete(s.locks, key)
		s.notify(key)
		s.settle(key, now)
		return result{l.token, true}, nil
	})
	return r.token, r.ok, err
}

func (l lockState) info(key string, now time.Time) driver.LockInfo {
	return driver.LockInfo{Key: key, Token: l.token, Owner: l.owner, Since: l.since, TTL: l.expires.Sub(now)}
}

// The checks below reject what dlock's engine never sends, so that a bug
// in code driving the store directly fails loudly here instead of in
// production, where a real store may do something odd with it.

func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", driver.ErrInvalid)
	}
	return nil
}

func checkKeyID(key, id string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%w: empty owner id for key %q", driver.ErrInvalid, key)
	}
	return nil
}

func (s *store) checkLease(key, id string, ttl time.Duration) error {
	if err := checkKeyID(key, id); err != nil {
		return err
	}
	if ttl < s.caps.MinTTL || ttl%s.caps.TTLUnit != 0 {
		return fmt.Errorf("%w: TTL %v of key %q is not a multiple of %v of at least %v",
			driver.ErrInvalid, ttl, key, s.caps.TTLUnit, s.caps.MinTTL)
	}
	return nil
}

func (s *store) checkBatch(n int) error {
	if n > s.caps.MaxBatch {
		return fmt.Errorf("%w: batch of %d requests exceeds MaxBatch %d", driver.ErrInvalid, n, s.caps.MaxBatch)
	}
	return nil
}

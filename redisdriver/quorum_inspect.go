package redisdriver

import (
	"context"
	"slices"
	"time"

	"github.com/dlockio/dlock/driver"
)

var _ driver.Inspector = (*Quorum)(nil)

// Inspect implements driver.Inspector with the majority's view: a lock is
// held when a majority of the masters hold it with the same token (every
// master of a lease's majority records the lease's token: quorum_vote.go),
// and its TTL is the time until fewer than a majority will still hold it.
// A lock held by a minority only (a vote that failed, being released; a
// lease lost) is free. Fewer than a majority answering is ErrNoQuorum.
func (q *Quorum) Inspect(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	type seen struct {
		info driver.LockInfo
		ok   bool
	}
	answers := fanOut(ctx, q, q.all(), q.callTimeout(ctx), func(ctx context.Context, m *member) (seen, error) {
		info, ok, err := m.d.Inspect(ctx, key)
		return seen{info, ok}, err
	}, nil, nil)
	var infos []driver.LockInfo
	var errs []error
	answered := 0
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		answered++
		if a.v.ok {
			infos = append(infos, a.v.info)
		}
	}
	if answered < q.majority {
		return driver.LockInfo{}, false, q.noQuorum("inspect", answered, errs)
	}
	info, ok := q.majorityView(infos)
	return info, ok, nil
}

// majorityView returns the lock that a majority of infos (one master's
// view each, of one key) show with the same token, with the TTL its
// majority still has: the majority-th longest.
func (q *Quorum) majorityView(infos []driver.LockInfo) (driver.LockInfo, bool) {
	byToken := map[uint64][]driver.LockInfo{}
	for _, in := range infos {
		byToken[in.Token] = append(byToken[in.Token], in)
	}
	for _, same := range byToken {
		if len(same) < q.majority {
			continue
		}
		ttls := make([]time.Duration, len(same))
		for i, in := range same {
			ttls[i] = in.TTL
		}
		slices.Sort(ttls)
		info := same[0]
		info.TTL = ttls[len(ttls)-q.majority]
		return info, true
	}
	return driver.LockInfo{}, false
}

// List implements driver.Inspector: the names any master lists under
// prefix, each as Inspect sees it.
func (q *Quorum) List(ctx context.Context, prefix string) ([]driver.LockInfo, error) {
	answers := fanOut(ctx, q, q.all(), q.callTimeout(ctx), func(ctx context.Context, m *member) ([]driver.LockInfo, error) {
		return m.d.List(ctx, prefix)
	}, nil, nil)
	perKey := map[string][]driver.LockInfo{}
	var errs []error
	answered := 0
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		answered++
		for _, in := range a.v {
			perKey[in.Key] = append(perKey[in.Key], in)
		}
	}
	if answered < q.majority {
		return nil, q.noQuorum("list", answered, errs)
	}
	var out []driver.LockInfo
	for _, infos := range perKey {
		if info, ok := q.majorityView(infos); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

// ForceRelease implements driver.Inspector: it frees the lock on every
// master (each keeps the token on record and wakes waiters, as a release
// does) and returns the token a majority held it with; ok is false when no
// majority held it.
func (q *Quorum) ForceRelease(ctx context.Context, key string) (uint64, bool, error) {
	type broken struct {
		token uint64
		ok    bool
	}
	answers := fanOut(ctx, q, q.all(), q.callTimeout(ctx), func(ctx context.Context, m *member) (broken, error) {
		tok, ok, err := m.d.ForceRelease(ctx, key)
		return broken{tok, ok}, err
	}, nil, nil)
	counts := map[uint64]int{}
	var errs []error
	answered := 0
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		answered++
		if a.v.ok {
			counts[a.v.token]++
		}
	}
	for tok, n := range counts {
		if n >= q.majority {
			return tok, true, nil
		}
	}
	if answered < q.majority {
		return 0, false, q.noQuorum("force release", answered, errs)
	}
	return 0, false, nil
}

// InspectQueue implements driver.Inspector: a Quorum has no queue.
func (q *Quorum) InspectQueue(context.Context, string) (driver.QueueInfo, bool, error) {
	return driver.QueueInfo{}, false, nil
}

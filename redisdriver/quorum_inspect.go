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
	views, err := majorityAnswered(q, "inspect", answers)
	if err != nil {
		return driver.LockInfo{}, false, err
	}
	var infos []driver.LockInfo
	for _, v := range views {
		if v.ok {
			infos = append(infos, v.info)
		}
	}
	info, ok := q.majorityView(infos)
	return info, ok, nil
}

// majorityAnswered returns the values of the answers that came, or
// ErrNoQuorum (for what) when fewer than a majority of the masters
// answered.
func majorityAnswered[T any](q *Quorum, what string, answers []answer[T]) ([]T, error) {
	var vs []T
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		vs = append(vs, a.v)
	}
	if len(vs) < q.majority {
		return nil, q.noQuorum(what, len(vs), errs)
	}
	return vs, nil
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
	lists, err := majorityAnswered(q, "list", answers)
	if err != nil {
		return nil, err
	}
	perKey := map[string][]driver.LockInfo{}
	for _, list := range lists {
		for _, in := range list {
			perKey[in.Key] = append(perKey[in.Key], in)
		}
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
	broke, err := majorityAnswered(q, "force release", answers)
	if err != nil {
		return 0, false, err
	}
	counts := map[uint64]int{}
	for _, b := range broke {
		if b.ok {
			counts[b.token]++
		}
	}
	for tok, n := range counts {
		if n >= q.majority {
			return tok, true, nil
		}
	}
	return 0, false, nil
}

// InspectQueue implements driver.Inspector: a Quorum has no queue.
func (q *Quorum) InspectQueue(context.Context, string) (driver.QueueInfo, bool, error) {
	return driver.QueueInfo{}, false, nil
}

package redisdriver

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/dlockio/dlock/driver"
)

//go:embed quorum_raise.lua
var quorumRaiseLua string

// quorumRaiseScript raises a held lock's token to the quorum's (see the
// script).
var quorumRaiseScript = newScript("quorum_raise", "", quorumRaiseLua)

// vote is one master's answer to an acquisition.
type vote struct {
	res driver.AcquireResult
	// out: the master restarted too recently to vote (member.votes).
	out bool
}

// Acquire implements driver.Driver. It asks every master at once; the lock
// is taken when a majority granted it, and its token is then the highest
// they issued, raised to on every one of them that issued less before
// Acquire returns (docs/quorum.md says why that orders the tokens). Votes
// that do not make a majority are released. A split vote (rivals that each
// won a minority) is voted again, up to splitVoteRetries times, after a
// random delay.
//
// The request carries a proposed token, above the client's clock and every
// token this Quorum has seen, so that the masters usually all issue that
// one and nothing needs raising. A repeated request with the same ID finds
// its own lock on every master of its majority, all with the lease's
// token, and answers it again.
func (q *Quorum) Acquire(ctx context.Context, req driver.AcquireRequest) (driver.AcquireResult, error) {
	if err := checkID(req.ID); err != nil {
		return driver.AcquireResult{}, err
	}
	if err := checkTTL(req.TTL); err != nil {
		return driver.AcquireResult{}, err
	}
	for attempt := 0; ; attempt++ {
		if err := q.awaitReleases(ctx, req.ID); err != nil {
			return driver.AcquireResult{}, err
		}
		start := time.Now()
		res, split, err := q.acquireOnce(ctx, req)
		if err != nil || res.Acquired || !split || attempt == splitVoteRetries {
			return res, err
		}
		// Rivals took a minority each and are releasing it: try again at a
		// random moment within a few votes' time so they do not meet again.
		pause := rand.N(4*time.Since(start) + time.Millisecond)
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(pause):
		}
	}
}

// acquireOnce is one vote. split reports a failed vote in which this
// request won at least one master (a rival may have won the others).
func (q *Quorum) acquireOnce(ctx context.Context, req driver.AcquireRequest) (res driver.AcquireResult, split bool, err error) {
	floor := q.proposal()
	delay := req.TTL
	if q.cfg.delaySet {
		delay = q.cfg.restartDelay
	}
	timeout := min(q.cfg.voteTimeout, req.TTL/4)
	votes := fanOut(ctx, q, q.all(), timeout, func(ctx context.Context, m *member) (vote, error) {
		ok, dials, err := m.votes(ctx, delay)
		if err != nil || !ok {
			return vote{out: !ok}, err
		}
		r, err := m.d.acquire(ctx, req, floor)
		if err == nil && r.Acquired {
			if ok, err := m.stillVotes(ctx, delay, dials); !ok {
				return vote{res: r, out: true}, err
			}
		}
		return vote{res: r}, err
	}, func(late answer[vote]) {
		if late.err == nil && late.v.res.Acquired {
			q.releaseInBackground(req, []int{late.i})
		}
	})
	if err := invalid(votes); err != nil {
		return driver.AcquireResult{}, false, err
	}
	var yes, answered, outGranted []int
	var tokens []uint64
	var busy []time.Duration
	var errs []error
	for _, v := range votes {
		if v.v.out && v.v.res.Acquired {
			// Granted by a master found restarted since: not a vote, and
			// not left behind for a retry of this ID to count.
			outGranted = append(outGranted, v.i)
		}
		switch {
		case v.err != nil:
			errs = append(errs, fmt.Errorf("master %d: %w", v.i, v.err))
		case v.v.out:
			errs = append(errs, fmt.Errorf("master %d: restarted less than %v ago", v.i, delay))
		case v.v.res.Acquired:
			yes, tokens = append(yes, v.i), append(tokens, v.v.res.Token)
			answered = append(answered, v.i)
		default:
			busy = append(busy, v.v.res.RetryAfter)
			answered = append(answered, v.i)
		}
	}
	if len(outGranted) > 0 {
		q.releaseInBackground(req, outGranted)
	}
	if len(yes) >= q.majority {
		return q.settle(ctx, req, yes, tokens, timeout)
	}
	if len(yes) > 0 {
		q.releaseInBackground(req, yes)
	}
	if len(answered) < q.majority {
		return driver.AcquireResult{}, false, q.noQuorum("acquire", len(answered), errs)
	}
	return driver.AcquireResult{RetryAfter: q.retryAfter(busy)}, len(yes) > 0, nil
}

// proposal is the token the next vote proposes: ahead of the client's
// clock by tokenLead, and above every token this Quorum has seen.
func (q *Quorum) proposal() uint64 {
	p := uint64(time.Now().Add(tokenLead).UnixMicro())
	return max(p, q.lastToken.Load()+1)
}

// saw records a token this Quorum has seen.
func (q *Quorum) saw(tok uint64) {
	for {
		cur := q.lastToken.Load()
		if tok <= cur || q.lastToken.CompareAndSwap(cur, tok) {
			return
		}
	}
}

// settle makes a majority's grant a lease: its token is the highest the
// majority issued, raised to on the masters that issued less. If fewer
// than a majority then hold it, the grant is released and the attempt
// failed (a split, to be voted again): the masters that did raise keep the
// token on record through the release.
func (q *Quorum) settle(ctx context.Context, req driver.AcquireRequest, yes []int, tokens []uint64, timeout time.Duration) (driver.AcquireResult, bool, error) {
	top := slices.Max(tokens)
	q.saw(top)
	var low []int
	for k, tok := range tokens {
		if tok < top {
			low = append(low, yes[k])
		}
	}
	if len(low) == 0 {
		return driver.AcquireResult{Acquired: true, Token: top}, false, nil
	}
	raised := fanOut(ctx, q, low, timeout, func(ctx context.Context, m *member) (bool, error) {
		lock := m.d.lockKey(req.Key)
		n, err := m.d.run(ctx, quorumRaiseScript, []string{lock}, idPrefix(req.ID), strconv.FormatUint(top, 10)).Int()
		return n == 1, err
	}, nil)
	holding := len(yes) - len(low)
	for _, r := range raised {
		if r.err == nil && r.v {
			holding++
		}
	}
	if holding >= q.majority {
		return driver.AcquireResult{Acquired: true, Token: top}, false, nil
	}
	q.releaseInBackground(req, yes)
	return driver.AcquireResult{}, true, nil
}

// retryAfter is when a refused waiter should try again: when enough of the
// busy masters' locks will have expired for a majority to be free, less a
// random tenth so that waiters do not all come back at once (never more
// than the holder's time left, which the engine relies on).
func (q *Quorum) retryAfter(busy []time.Duration) time.Duration {
	free := len(q.members) - len(busy)
	need := q.majority - free
	if need <= 0 {
		return 0
	}
	slices.Sort(busy) // unknown (negative) first: it cannot be counted on
	if busy[0] < 0 {
		return -1
	}
	after := busy[need-1]
	return after - rand.N(after/10+1)
}

// releaseInBackground releases req's lock on the masters of idx, off the
// caller's path: votes that did not make a lease. A later Acquire with the
// same ID (a retry) waits for it first (awaitReleases): else it could
// count a master's old grant as its vote just before this release took it.
// Close waits for it too.
func (q *Quorum) releaseInBackground(req driver.AcquireRequest, idx []int) {
	q.pendingMu.Lock()
	p := q.pending[req.ID]
	if p == nil {
		p = &pendingRelease{done: make(chan struct{})}
		q.pending[req.ID] = p
	}
	p.n++
	q.pendingMu.Unlock()
	q.calls.Add(1)
	go func() {
		defer q.calls.Done()
		rel := []driver.ReleaseRequest{{Key: req.Key, ID: req.ID}}
		fanOut(context.Background(), q, idx, q.cfg.voteTimeout, func(ctx context.Context, m *member) ([]driver.ReleaseResult, error) {
			return m.d.Release(ctx, rel)
		}, nil)
		q.pendingMu.Lock()
		if p.n--; p.n == 0 {
			delete(q.pending, req.ID)
			close(p.done)
		}
		q.pendingMu.Unlock()
	}()
}

// pendingRelease counts the background releases of one ID under way.
type pendingRelease struct {
	n    int
	done chan struct{} // closed when n is back to 0
}

// awaitReleases waits until no background release of id is under way, or
// ctx ends.
func (q *Quorum) awaitReleases(ctx context.Context, id string) error {
	q.pendingMu.Lock()
	p := q.pending[id]
	q.pendingMu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package redisdriver

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
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
	var last driver.AcquireResult
	for attempt := 0; ; attempt++ {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if attempt > 0 {
			// A retry after a split vote waits for the earlier try's
			// answers only a vote's time: a silent master's may take as
			// long as its client's own timeouts. Not acquired then; the
			// caller tries again with another ID, which they cannot touch.
			sctx, cancel = context.WithTimeout(ctx, q.cfg.voteTimeout)
		}
		failed, err := q.settling(sctx, req.ID)
		cancel()
		if err != nil && attempt > 0 && ctx.Err() == nil {
			return last, nil
		}
		if err != nil {
			return driver.AcquireResult{}, err
		}
		if failed {
			// A release of an earlier try's grants went unanswered: it
			// may still delete them, so they must not count as this
			// try's votes. Not acquired; the caller tries again (a
			// Client's Lock with another ID).
			return last, nil
		}
		start := time.Now()
		res, split, err := q.acquireOnce(ctx, req)
		if err != nil || res.Acquired || !split || attempt == splitVoteRetries {
			return res, err
		}
		last = res
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
	lv := newLateVotes(q, req)
	var votes []answer[vote]
	defer func() {
		if res.Acquired {
			lv.decide(res.Token, len(votes))
		} else {
			lv.decide(0, len(votes))
		}
	}()
	start := time.Now()
	defer func() { q.voteTook.Store(int64(time.Since(start))) }()
	votes = fanOut(ctx, q, q.all(), timeout, func(ctx context.Context, m *member) (vote, error) {
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
	}, q.voteDecided, lv.add)
	if err := invalid(votes); err != nil {
		// What others granted is not left held by nobody.
		var granted []int
		for _, v := range votes {
			if v.err == nil && v.v.res.Acquired {
				granted = append(granted, v.i)
			}
		}
		if len(granted) > 0 {
			q.releaseInBackground(req, granted)
		}
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

// voteDecided reports, for fanOut, when the votes so far decide an
// acquisition: a majority granted it, or too few can still grant it and
// whether a majority answers is settled too (it tells a busy lock from
// ErrNoQuorum).
func (q *Quorum) voteDecided(got []answer[vote]) bool {
	yes, answered := 0, 0
	for _, a := range got {
		if a.err == nil && !a.v.out {
			answered++
			if a.v.res.Acquired {
				yes++
			}
		}
	}
	if yes >= q.majority {
		return true
	}
	pending := len(q.members) - len(got)
	return yes+pending < q.majority && (answered >= q.majority || answered+pending < q.majority)
}

// lateVotes handles the answers of an acquisition that came after its vote
// was counted. A grant with the lease's token, while the lease has not
// been released, is the lease's on one more master, and is kept: a retry
// of the acquisition then finds the lease's token there too. Any other
// grant (the vote failed, another token, a master found restarted, a lease
// released already, which a grant kept would outlive) is released.
// The acquisition's ID stays unsettled until every master's answer came.
type lateVotes struct {
	q       *Quorum
	req     driver.AcquireRequest
	settled func() // see Quorum.unsettled
	mu      sync.Mutex
	decided bool
	token   uint64 // the lease's; 0 when the vote failed
	waiting []answer[vote]
	missing int // answers yet to come
}

func newLateVotes(q *Quorum, req driver.AcquireRequest) *lateVotes {
	return &lateVotes{q: q, req: req, settled: q.unsettled(req.ID), missing: len(q.members)}
}

func (lv *lateVotes) add(a answer[vote]) {
	lv.mu.Lock()
	lv.missing--
	if !lv.decided {
		lv.waiting = append(lv.waiting, a)
		lv.mu.Unlock()
		return
	}
	last := lv.missing == 0
	lv.mu.Unlock()
	lv.handle(a)
	if last {
		lv.settled()
	}
}

// decide records that the vote was counted, with counted answers, and its
// lease's token (0: no lease), and handles the late answers that came
// before.
func (lv *lateVotes) decide(token uint64, counted int) {
	lv.mu.Lock()
	lv.decided, lv.token = true, token
	lv.missing -= counted
	waiting, last := lv.waiting, lv.missing == 0
	lv.waiting = nil
	lv.mu.Unlock()
	for _, a := range waiting {
		lv.handle(a)
	}
	if last {
		lv.settled()
	}
}

func (lv *lateVotes) handle(a answer[vote]) {
	r := a.v.res
	keep := lv.token != 0 && r.Token == lv.token && !a.v.out && !lv.q.wasReleased(lv.req.ID)
	if a.err == nil && r.Acquired && !keep {
		lv.q.releaseInBackground(lv.req, []int{a.i})
	}
}

// proposal is the token the next vote proposes: ahead of the client's
// clock by twice the time the last vote took (within minTokenLead and
// maxTokenLead), and above every token this Quorum has seen.
func (q *Quorum) proposal() uint64 {
	lead := min(max(2*time.Duration(q.voteTook.Load()), minTokenLead), maxTokenLead)
	p := uint64(time.Now().Add(lead).UnixMicro())
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
	}, nil, nil)
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
// caller's path: votes that did not make a lease. Each release is waited
// for to the end (go-redis bounds it), not only for the vote timeout, as a
// retry with the same ID waits for it (settling). Close waits for it too.
func (q *Quorum) releaseInBackground(req driver.AcquireRequest, idx []int) {
	settled := q.unsettled(req.ID)
	q.calls.Add(1)
	go func() {
		defer q.calls.Done()
		defer settled()
		rel := []driver.ReleaseRequest{{Key: req.Key, ID: req.ID}}
		var wg sync.WaitGroup
		for _, i := range idx {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), q.cfg.voteTimeout)
				defer cancel()
				if _, err := q.members[i].d.Release(ctx, rel); err != nil {
					q.releaseFailed(req.ID)
				}
			})
		}
		wg.Wait()
	}()
}

// unsettledID counts what is under way for one owner ID: acquisitions whose
// every answer has not come yet, and background releases.
type unsettledID struct {
	n        int
	done     chan struct{} // closed when n is back to 0
	released bool          // a Release of the ID was sent meanwhile
	// failed is set when a background release of the ID's grants got no
	// answer or an error: it may still be applied later (settling).
	failed bool
}

// unsettled marks id as having a call under way until the returned func is
// called (once). An Acquire with the same ID, a retry, waits until nothing
// of the ID is under way (settling): else it could count as its vote a
// master's grant to an earlier try that is about to be released, or a
// grant whose answer is still on its way.
func (q *Quorum) unsettled(id string) (settled func()) {
	q.pendingMu.Lock()
	p := q.pending[id]
	if p == nil {
		p = &unsettledID{done: make(chan struct{})}
		q.pending[id] = p
	}
	p.n++
	q.pendingMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.pendingMu.Lock()
			defer q.pendingMu.Unlock()
			if p.n--; p.n == 0 {
				delete(q.pending, id)
				close(p.done)
			}
		})
	}
}

// releasing notes that the leases of reqs are being released: a late
// grant to an acquisition of theirs still under way is then not kept.
func (q *Quorum) releasing(reqs []driver.ReleaseRequest) {
	q.pendingMu.Lock()
	defer q.pendingMu.Unlock()
	if len(q.pending) == 0 {
		return
	}
	for _, r := range reqs {
		if p := q.pending[r.ID]; p != nil {
			p.released = true
		}
	}
}

// wasReleased reports whether a Release of id was sent while something of
// it is under way.
func (q *Quorum) wasReleased(id string) bool {
	q.pendingMu.Lock()
	defer q.pendingMu.Unlock()
	p := q.pending[id]
	return p != nil && p.released
}

// releaseFailed notes that a background release of id's grants failed
// (releaseInBackground, which holds id unsettled meanwhile).
func (q *Quorum) releaseFailed(id string) {
	q.pendingMu.Lock()
	defer q.pendingMu.Unlock()
	if p := q.pending[id]; p != nil {
		p.failed = true
	}
}

// settling waits until nothing of id is under way (unsettled), or ctx
// ends; failed reports that a background release of its grants failed
// meanwhile, so that a master may still hold, or later lose, such a grant.
func (q *Quorum) settling(ctx context.Context, id string) (failed bool, err error) {
	q.pendingMu.Lock()
	p := q.pending[id]
	q.pendingMu.Unlock()
	if p == nil {
		return false, nil
	}
	select {
	case <-p.done:
		q.pendingMu.Lock()
		defer q.pendingMu.Unlock()
		return p.failed, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

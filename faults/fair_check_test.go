package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// takeoverSlack is how long after a killed holder's TTL the next holder
// may take over: the head waiter pokes the store when the holder's TTL,
// as the enqueue reply told it, runs out; the slack covers that round
// trip and scheduling on a loaded machine under -race.
const takeoverSlack = 500 * time.Millisecond

// fairResult is what checkFair finds.
type fairResult struct {
	overlaps   int // pairs of acquisitions whose validity windows intersect
	overlapMax time.Duration
	tokenOrder int // acquisitions whose token is not above every earlier one's
	fifo       int // live waiters overtaken by a request sent after they were queued
	fifoPairs  int // (waiter, later request) pairs the FIFO rule was checked on
	examples   []string
	leftKeys   []string // keys still in the store one TTL after the run
}

func (f fairResult) String() string {
	return fmt.Sprintf("valid-overlaps=%d (max %v) token-order=%d fifo=%d of %d pairs %v left-keys=%v",
		f.overlaps, f.overlapMax.Round(time.Millisecond), f.tokenOrder, f.fifo, f.fifoPairs, f.examples, f.leftKeys)
}

// checkFairRun asserts what docs/fair-lock.md promises under every fault of
// TestFaultsFair.
func checkFairRun(t *testing.T, sc fairScenario, res result, fr fairResult) {
	t.Helper()
	if res.Faults == 0 || res.Accepted == 0 {
		t.Errorf("the run proves nothing: %d faults injected, %d writes accepted", res.Faults, res.Accepted)
	}
	if fr.fifoPairs == 0 {
		t.Errorf("the FIFO rule was checked on no pair of live waiters")
	}
	if res.Stale != 0 {
		t.Errorf("%d stale writes accepted", res.Stale)
	}
	if sc.wantRejected && res.Rejected == 0 {
		t.Errorf("the fault made a stale holder, but the register rejected no write")
	}
	if fr.overlaps != 0 {
		t.Errorf("%d pairs of valid holders overlapped (longest %v)", fr.overlaps, fr.overlapMax)
	}
	if fr.tokenOrder != 0 || res.Inversions != 0 {
		t.Errorf("%d tokens not above the previous grant's, %d not above an earlier holder's", fr.tokenOrder, res.Inversions)
	}
	if fr.fifo != 0 {
		t.Errorf("%d live waiters overtaken: %v", fr.fifo, fr.examples)
	}
	if res.LostAcked != 0 {
		t.Errorf("%d acknowledged increments lost", res.LostAcked)
	}
	if res.Linear == porcupine.Illegal {
		t.Error("the counter's history is not linearizable")
	}
	if res.Stuck != 0 || res.Unrecovered != 0 {
		t.Errorf("stuck %d, unrecovered kills %d", res.Stuck, res.Unrecovered)
	}
	for _, d := range res.Recovery {
		if d > sc.ttl+takeoverSlack {
			t.Errorf("%v from kill to the next acquisition, TTL %v + %v allowed", d, sc.ttl, takeoverSlack)
		}
	}
	if len(res.Leaked) != 0 || len(fr.leftKeys) != 0 {
		t.Errorf("keys without expiry %v; keys left one TTL after the run %v", res.Leaked, fr.leftKeys)
	}
}

// request is one Lock(WithFIFO) call as its worker's driver saw it.
type request struct {
	id, worker string
	sent       int64 // first Enqueue sent
	queued     int64 // reply of the first Enqueue that queued it; 0 if none did
	granted    int64 // Lock returned holding it; 0 if it never did
	tok        uint64
}

// checkFair checks the fair lock's history:
//
//   - validity windows (grant to the end of the lease or its validity
//     deadline, whichever came first; kill for a killed holder) of two
//     acquisitions never intersect;
//   - in the order Lock returned, every token is above all earlier ones;
//   - FIFO among live waiters: if request A's Enqueue reply said it was
//     queued before request B (of another worker) was sent, B was sent
//     while A still waited, and A was live, then A was granted first
//     (lower token). A is live if no fault hit its worker or the store
//     between sending A and A's grant; B may be anyone — a faulted request
//     must not overtake a live one either. Comparing A's reply with B's
//     send makes the order exact: A was in the store's queue before B's
//     request left its process.
func checkFair(events []event) fairResult {
	var res fairResult
	acqs := assemble(events)
	res.overlaps, res.overlapMax = overlaps(acqs)
	var top uint64
	for _, a := range acqs { // by the time Lock returned
		if a.tok <= top {
			res.tokenOrder++
		}
		top = max(top, a.tok)
	}

	reqs := map[string]*request{}
	var order []*request
	type fault struct {
		worker string
		t      int64
	}
	var faults []fault
	for _, e := range events {
		switch e.K {
		case evEnq:
			q := reqs[e.N]
			if q == nil {
				q = &request{id: e.N, worker: e.W, sent: e.T0}
				reqs[e.N] = q
				order = append(order, q)
			}
			if e.OK && q.queued == 0 {
				q.queued = e.T
			}
		case evGrant:
			if q := reqs[e.N]; q != nil {
				q.granted, q.tok = e.T, e.Tok
			}
		case evPause, evResume, evKill, evFault:
			faults = append(faults, fault{e.W, e.T})
		}
	}
	live := func(q *request) bool {
		for _, f := range faults {
			if (f.worker == q.worker || f.worker == storeWorker) && f.t >= q.sent && f.t <= q.granted {
				return false
			}
		}
		return true
	}
	for _, a := range order {
		if a.queued == 0 || a.granted == 0 || !live(a) {
			continue
		}
		for _, b := range order {
			if b.worker == a.worker || b.granted == 0 || b.sent <= a.queued || b.sent >= a.granted {
				continue
			}
			res.fifoPairs++
			if b.tok < a.tok {
				res.fifo++
				if len(res.examples) < 3 {
					res.examples = append(res.examples, fmt.Sprintf("%s of %s (queued, token %d) overtaken by %s of %s, sent %v later (token %d)",
						a.id, a.worker, a.tok, b.id, b.worker, time.Duration(b.sent-a.queued), b.tok))
				}
			}
		}
	}
	return res
}

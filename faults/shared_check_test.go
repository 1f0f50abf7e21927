package faults

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// checkSharedRun asserts what docs/rwlock.md and docs/semaphore.md promise
// under every fault of TestFaultsShared.
func checkSharedRun(t *testing.T, sc sharedScenario, res result, sr sharedResult, left int) {
	t.Helper()
	if res.Faults == 0 || res.Acquisitions == 0 {
		t.Errorf("the run proves nothing: %d faults, %d acquisitions", res.Faults, res.Acquisitions)
	}
	if sr.conflicts != 0 {
		t.Errorf("%d acquisitions were valid together with holders they exclude: %v", sr.conflicts, sr.examples)
	}
	if sc.permits > 0 && sr.maxPermits > sc.permits {
		t.Errorf("%d permits valid at once, N = %d", sr.maxPermits, sc.permits)
	}
	if res.Stale != 0 {
		t.Errorf("%d stale writes accepted", res.Stale)
	}
	// A paused holder that, resumed, learns of its loss before it acts
	// has nothing to reject (a loaded machine's scheduling decides which
	// of its steps come first); the run must still show the register
	// refusing a stale holder's read or write. That none was accepted is
	// the check above.
	if sc.wantRejected && res.Rejected+sr.rejectedReads == 0 {
		t.Errorf("stale holders were made, but the register rejected %d writes and %d reads; want some", res.Rejected, sr.rejectedReads)
	}
	if res.LostAcked != 0 {
		t.Errorf("%d acknowledged increments lost", res.LostAcked)
	}
	if sr.inversions != 0 {
		t.Errorf("%d write tokens not above an earlier holder's, or read tokens below an earlier writer's", sr.inversions)
	}
	if len(res.Leaked) != 0 || left != 0 {
		t.Errorf("left behind: keys without expiry %v, %d holders one TTL after the end", res.Leaked, left)
	}
	if res.Stuck != 0 || res.Unrecovered != 0 {
		t.Errorf("stuck %d, unrecovered kills %d", res.Stuck, res.Unrecovered)
	}
	for _, d := range res.Recovery {
		if d > sc.ttl+time.Second {
			t.Errorf("%v from kill to the next acquisition, TTL %v", d, sc.ttl)
		}
	}
}

// sharedResult is what checkShared finds.
type sharedResult struct {
	conflicts  int // acquisitions valid at the same time as one they exclude
	maxPermits int // most permit holders valid at once
	inversions int
	examples   []string
	// rejectedReads: read-lease reads the register refused (stale epochs).
	rejectedReads int
}

func (s sharedResult) String() string {
	return fmt.Sprintf("conflicts=%d max-permits=%d inversions=%d rejected-reads=%d", s.conflicts, s.maxPermits, s.inversions, s.rejectedReads)
}

// checkShared compares the validity intervals of every pair of holders:
// a writer must overlap nobody; with permits > 0, at most permits holders
// may be valid at any instant. Tokens: a writer's must be above every
// token of a holder whose validity ended before it started; a reader's at
// least every such writer's.
func checkShared(events []event, permits int) sharedResult {
	acqs := assemble(events)
	role := map[string]string{}
	for _, e := range events {
		if e.K == evAcq {
			role[e.A] = e.N
		}
	}
	var res sharedResult
	for i, a := range acqs {
		for _, b := range acqs[i+1:] {
			if b.start >= a.end {
				break
			}
			if role[a.id] == roleWriter || role[b.id] == roleWriter {
				res.conflicts++
				if len(res.examples) < 3 {
					res.examples = append(res.examples, fmt.Sprintf("%s(%s) and %s(%s) for %v", a.id, role[a.id], b.id, role[b.id],
						time.Duration(min(a.end, b.end)-b.start)))
				}
			}
		}
	}
	if permits > 0 {
		type edge struct {
			t     int64
			delta int
		}
		var edges []edge
		for _, a := range acqs {
			edges = append(edges, edge{a.start, 1}, edge{a.end, -1})
		}
		// Ends before starts at the same instant: the intervals are half-open.
		slices.SortFunc(edges, func(x, y edge) int {
			if c := cmpInt(x.t, y.t); c != 0 {
				return c
			}
			return x.delta - y.delta
		})
		n := 0
		for _, e := range edges {
			n += e.delta
			if n > res.maxPermits {
				res.maxPermits = n
			}
		}
		if res.maxPermits > permits {
			res.conflicts += res.maxPermits - permits
		}
		return res // permit tokens are ids, not fencing tokens
	}
	for _, b := range acqs {
		for _, a := range acqs {
			if a.end >= b.start {
				continue
			}
			switch {
			case role[b.id] == roleWriter && b.tok <= a.tok:
				res.inversions++
			case role[b.id] == roleReader && role[a.id] == roleWriter && b.tok < a.tok:
				res.inversions++
			}
		}
	}
	return res
}

package faults

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// acquisition is one holder's lock period, assembled from events.
type acquisition struct {
	id, worker string
	start, end int64 // belief: from Lock returning to Unlock or Done
	tok, ord   uint64

	readCall, readRet   int64
	writeCall, writeRet int64
	wroteOK             bool // the worker saw its write accepted
}

// result is what one run of one scenario measured.
type result struct {
	Acquisitions int
	Accepted     int // writes the register accepted
	Rejected     int // writes it refused: fencing at work
	Stale        int // (a) accepted writes from a holder a newer holder had already overtaken at the register
	Overlaps     int // (b) pairs of holders that believed they held the lock at the same time
	OverlapMax   time.Duration
	LostAcked    int             // (c) acknowledged increments missing from the final value
	Inversions   int             // holders whose token was not above that of a holder that ended before they started
	Recovery     []time.Duration // (d) SIGKILL of a holder to the next acquisition
	Unrecovered  int             // kills after which nobody acquired again
	Leaked       []string        // (e) keys without expiry left in the lock store
	Stuck        int             // workers that gave up acquiring
	Faults       int
	Linear       porcupine.CheckResult
	Final        int64
}

// check builds the result of a run from its events, the register's log and
// final value, and the keys left in the lock store.
func check(events []event, log []fenceOp, final int64, leaked []string) result {
	res := result{Final: final, Leaked: leaked}
	acqs := assemble(events)
	res.Acquisitions = len(acqs)
	for _, e := range events {
		switch e.K {
		case evStuck:
			res.Stuck++
		case evFault:
			res.Faults++
		}
	}
	res.Overlaps, res.OverlapMax = overlaps(acqs)
	res.Inversions = inversions(acqs)
	res.Recovery, res.Unrecovered = recovery(events, acqs)

	byID := make(map[string]*acquisition, len(acqs))
	for _, a := range acqs {
		byID[a.id] = a
	}
	// (a) The register "has seen" a holder once any call of it arrived. A
	// write accepted after a call from a holder later in acquisition order
	// is stale, whatever token it carried.
	var newest uint64
	for _, op := range log {
		a := byID[op.Acq]
		if a == nil {
			continue
		}
		if op.Write {
			if op.OK {
				res.Accepted++
				if newest > a.ord {
					res.Stale++
				}
			} else {
				res.Rejected++
			}
		}
		newest = max(newest, a.ord)
	}
	res.LostAcked = lostAcked(log, byID)
	res.Linear = linearizable(acqs, log)
	return res
}

// assemble turns events into acquisitions sorted by start. A holder that was
// killed, or whose process ended without an end event, stopped believing
// when it was killed or reaped.
func assemble(events []event) []*acquisition {
	byID := map[string]*acquisition{}
	var acqs []*acquisition
	gone := map[string][]int64{} // worker -> kill and exit times
	for _, e := range events {
		switch e.K {
		case evAcq:
			a := &acquisition{id: e.A, worker: e.W, start: e.T, tok: e.Tok, ord: e.Ord}
			byID[e.A] = a
			acqs = append(acqs, a)
		case evRead:
			if a := byID[e.A]; a != nil {
				a.readCall, a.readRet = e.T0, e.T
			}
		case evWrite:
			if a := byID[e.A]; a != nil {
				a.writeCall, a.writeRet, a.wroteOK = e.T0, e.T, e.OK && e.N == ""
			}
		case evEnd:
			if a := byID[e.A]; a != nil {
				a.end = e.T
			}
		case evKill, evExit:
			gone[e.W] = append(gone[e.W], e.T)
		}
	}
	for _, a := range acqs {
		if a.end != 0 {
			continue
		}
		a.end = math.MaxInt64
		for _, t := range gone[a.worker] {
			if t >= a.start && t < a.end {
				a.end = t
			}
		}
	}
	slices.SortFunc(acqs, func(x, y *acquisition) int { return cmpInt(x.start, y.start) })
	return acqs
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// overlaps counts pairs of belief intervals that intersect, and the longest
// intersection.
func overlaps(acqs []*acquisition) (int, time.Duration) {
	n, longest := 0, time.Duration(0)
	for i, a := range acqs {
		for _, b := range acqs[i+1:] {
			if b.start >= a.end {
				break // sorted by start: no later b overlaps a either
			}
			n++
			longest = max(longest, time.Duration(min(a.end, b.end)-b.start))
		}
	}
	return n, longest
}

// inversions counts holders whose fencing token is not above the token of
// every holder that had stopped believing before they started: tokens must
// follow real time, across restarts and failovers too. Locks without tokens
// are not checked.
func inversions(acqs []*acquisition) int {
	byEnd := slices.Clone(acqs)
	slices.SortFunc(byEnd, func(x, y *acquisition) int { return cmpInt(x.end, y.end) })
	n, i := 0, 0
	var top uint64
	for _, b := range acqs { // by start
		for ; i < len(byEnd) && byEnd[i].end < b.start; i++ {
			top = max(top, byEnd[i].tok)
		}
		if b.tok != 0 && top >= b.tok {
			n++
		}
	}
	return n
}

// recovery measures, for each SIGKILL of a holder, the time until the next
// acquisition by anyone.
func recovery(events []event, acqs []*acquisition) ([]time.Duration, int) {
	var out []time.Duration
	missing := 0
	for _, e := range events {
		if e.K != evKill {
			continue
		}
		found := false
		for _, a := range acqs {
			if a.start > e.T {
				out = append(out, time.Duration(a.start-e.T))
				found = true
				break
			}
		}
		if !found {
			missing++
		}
	}
	return out, missing
}

// lostAcked replays the register's accepted writes. The counter's value v
// is made of the increments that set it to 1, 2, ... v; a write that sets it
// to n discards the increments that had set n and above. An acknowledged
// increment missing from the final chain was lost.
func lostAcked(log []fenceOp, byID map[string]*acquisition) int {
	var chain []string // chain[i]: the acquisition whose write set i+1
	for _, op := range log {
		if !op.Write || !op.OK {
			continue
		}
		n := int(op.New)
		for len(chain) < n-1 {
			chain = append(chain, "") // increments lost earlier, revived by a count
		}
		chain = append(chain[:n-1], op.Acq)
	}
	present := map[string]bool{}
	for _, id := range chain {
		present[id] = true
	}
	lost := 0
	for _, op := range log {
		if op.Write && op.OK && !present[op.Acq] && byID[op.Acq] != nil && byID[op.Acq].wroteOK {
			lost++
		}
	}
	return lost
}

func (r result) String() string {
	return fmt.Sprintf("acq=%d accepted=%d rejected=%d stale=%d overlaps=%d (max %v) lost=%d inversions=%d "+
		"recovery=%v unrecovered=%d leaked=%v stuck=%d faults=%d linearizable=%s final=%d",
		r.Acquisitions, r.Accepted, r.Rejected, r.Stale, r.Overlaps, r.OverlapMax.Round(time.Millisecond),
		r.LostAcked, r.Inversions, roundAll(r.Recovery), r.Unrecovered, r.Leaked, r.Stuck, r.Faults, r.Linear, r.Final)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

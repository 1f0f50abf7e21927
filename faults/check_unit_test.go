package faults

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The checker is tested on hand-made histories, so that a clean dlock run
// is known to mean something.

const ms = int64(time.Millisecond)

// cycle is one acquisition's events: acquired at t, read at t+1, wrote at
// t+3, released at t+4 (milliseconds).
func cycle(w, acq string, t int64, ord uint64, read int64, wrote bool) []event {
	t *= ms
	ev := []event{
		{K: evAcq, W: w, A: acq, T: t, Tok: ord, Ord: ord},
		{K: evRead, W: w, A: acq, T0: t + ms, T: t + ms + 1, OK: true, V: read},
	}
	if wrote {
		ev = append(ev, event{K: evWrite, W: w, A: acq, T0: t + 3*ms, T: t + 3*ms + 1, OK: true, V: read + 1})
	}
	return append(ev, event{K: evEnd, W: w, A: acq, T: t + 4*ms})
}

func TestCheckerCleanHistory(t *testing.T) {
	events := append(cycle("a", "a.0", 0, 1, 0, true), cycle("b", "b.0", 10, 2, 1, true)...)
	log := []fenceOp{
		{Acq: "a.0", Tok: 1, Cur: 0, OK: true}, {Write: true, Acq: "a.0", Tok: 1, Cur: 0, New: 1, OK: true},
		{Acq: "b.0", Tok: 2, Cur: 1, OK: true}, {Write: true, Acq: "b.0", Tok: 2, Cur: 1, New: 2, OK: true},
	}
	r := check(events, log, 2, nil)
	if r.Stale+r.Overlaps+r.LostAcked+r.Inversions != 0 || r.Linear != porcupine.Ok || r.Accepted != 2 {
		t.Fatalf("clean history judged %v", r)
	}
}

// Two holders at once, both reading 0 and writing 1, unfenced: the classic
// lost update. Every check must see it.
func TestCheckerLostUpdate(t *testing.T) {
	var events []event
	events = append(events, cycle("a", "a.0", 0, 1, 0, true)...)
	events = append(events, cycle("b", "b.0", 1, 2, 0, true)...)
	log := []fenceOp{
		{Acq: "a.0", Cur: 0, OK: true},
		{Acq: "b.0", Cur: 0, OK: true},
		{Write: true, Acq: "a.0", Cur: 0, New: 1, OK: true}, // stale: b had read already
		{Write: true, Acq: "b.0", Cur: 1, New: 1, OK: true}, // overwrites a's increment
	}
	r := check(events, log, 1, nil)
	if r.Stale != 1 || r.Overlaps != 1 || r.LostAcked != 1 || r.Linear != porcupine.Illegal {
		t.Fatalf("lost update judged %v", r)
	}
}

// A holder that started after another had ended must have a larger token.
func TestCheckerTokenInversion(t *testing.T) {
	events := append(cycle("a", "a.0", 0, 5, 0, false), cycle("b", "b.0", 10, 3, 0, false)...)
	if r := check(events, nil, 0, nil); r.Inversions != 1 {
		t.Fatalf("inversion judged %v", r)
	}
}

// A killed holder's belief ends at the kill, and recovery runs from there.
func TestCheckerKill(t *testing.T) {
	events := []event{
		{K: evAcq, W: "a", A: "a.0", T: 0, Tok: 1, Ord: 1},
		{K: evKill, W: "a", T: 5 * ms},
		{K: evExit, W: "a", T: 6 * ms},
	}
	events = append(events, cycle("b", "b.0", 505, 2, 0, true)...)
	r := check(events, nil, 0, []string{"naive:job"})
	if r.Overlaps != 0 || len(r.Recovery) != 1 || r.Recovery[0] != 500*time.Millisecond || len(r.Leaked) != 1 {
		t.Fatalf("kill judged %v", r)
	}
}

package etcddriver

import "testing"

// The checker of the fault tests sees what it claims to: an overlap, a
// token inversion and a stale write in a made-up history, and nothing in
// a clean one.
func TestAnalyze(t *testing.T) {
	clean := []event{
		{W: "a", Ev: "done", Tok: 5, Acq: 100, End: 200, Wrote: true, Accepted: true, WriteT: 190},
		{W: "b", Ev: "lost", Tok: 7, Acq: 210, End: 300},
		{W: "a", Ev: "done", Tok: 9, Acq: 300, End: 400, Wrote: true, Accepted: false, WriteT: 450},
	}
	if h := analyze(clean); h.overlaps != 0 || h.inversions != 0 || h.stale != 0 || h.rejected != 1 || h.acquisitions != 3 {
		t.Errorf("clean history: %+v", h)
	}
	bad := []event{
		{W: "a", Ev: "done", Tok: 5, Acq: 100, End: 250, Wrote: true, Accepted: true, WriteT: 240},
		{W: "b", Ev: "done", Tok: 4, Acq: 200, End: 300, Wrote: true, Accepted: true, WriteT: 310},
	}
	h := analyze(bad)
	if h.overlaps != 1 || h.maxOverlap != 50 || h.inversions != 1 || h.stale != 1 {
		t.Errorf("bad history: %+v; want 1 overlap of 50ns, 1 inversion, 1 stale write", h)
	}
}

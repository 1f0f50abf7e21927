package faults

import "testing"

// The shared checker sees what it must: a writer overlapping a reader,
// N+1 permits at once, a writer token not above an earlier reader's.
func TestCheckSharedFindsViolations(t *testing.T) {
	acq := func(id, w, role string, start, end int64, tok uint64) []event {
		return []event{{K: evAcq, A: id, W: w, T: start, Tok: tok, N: role}, {K: evEnd, A: id, W: w, T: end}}
	}
	var clean, overlap []event
	clean = append(clean, acq("r1", "a", roleReader, 10, 20, 5)...)
	clean = append(clean, acq("r2", "b", roleReader, 12, 22, 5)...)
	clean = append(clean, acq("w1", "c", roleWriter, 25, 30, 7)...)
	if r := checkShared(clean, 0); r.conflicts != 0 || r.inversions != 0 {
		t.Fatalf("clean history: %v", r)
	}
	overlap = append(overlap, clean...)
	overlap = append(overlap, acq("w2", "d", roleWriter, 21, 26, 4)...)
	if r := checkShared(overlap, 0); r.conflicts != 2 || r.inversions != 1 {
		t.Fatalf("writer overlapping a reader and a writer, token below both readers': %v, want 2 conflicts, 1 inversion", r)
	}
	var permits []event
	permits = append(permits, acq("p1", "a", rolePermit, 10, 20, 1)...)
	permits = append(permits, acq("p2", "b", rolePermit, 11, 20, 2)...)
	permits = append(permits, acq("p3", "c", rolePermit, 20, 30, 3)...) // starts as two end: not a third
	if r := checkShared(permits, 2); r.conflicts != 0 || r.maxPermits != 2 {
		t.Fatalf("2 permits at a time: %v", r)
	}
	permits = append(permits, acq("p4", "d", rolePermit, 15, 16, 4)...)
	if r := checkShared(permits, 2); r.conflicts != 1 || r.maxPermits != 3 {
		t.Fatalf("3 permits at once with N=2: %v, want 1 conflict, max 3", r)
	}
}

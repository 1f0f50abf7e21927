package zkdriver

import (
	"fmt"
	"testing"
	"time"
)

// The releases a driver remembers are those of the last releasedKeep:
// older ones are dropped as new ones come, oldest first, whatever was
// settled (deleted) or released twice in between, and the queue of ids
// does not outgrow the minute's releases.
func TestReleasedIDsKeepTheLastMinute(t *testing.T) {
	r := releasedIDs{at: make(map[string]time.Time)}
	t0 := time.Now()
	for i := range 100 {
		r.add(fmt.Sprint("old", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	delete(r.at, "old5")                  // settled
	r.add("old7", t0.Add(30*time.Second)) // released again, later
	later := t0.Add(releasedKeep + time.Second)
	for i := range 10 {
		r.add(fmt.Sprint("new", i), later)
	}
	for i := range 100 {
		id := fmt.Sprint("old", i)
		if _, kept := r.at[id]; kept != (id == "old7") {
			t.Errorf("%s kept: %v", id, kept)
		}
	}
	for i := range 10 {
		if _, ok := r.at[fmt.Sprint("new", i)]; !ok {
			t.Errorf("new%d dropped", i)
		}
	}
	r.add("last", t0.Add(30*time.Second+releasedKeep+time.Second))
	if len(r.at) != 11 || len(r.order) != 11 {
		t.Errorf("%d ids remembered, %d queued; want 11 and 11 (old7 aged out)", len(r.at), len(r.order))
	}
	if _, ok := r.at["old7"]; ok {
		t.Error("old7 kept past its second release's minute")
	}
}

// BenchmarkReleasedAdd: remembering a release with a minute's worth of
// releases remembered (50,000: about 830 a second), as a busy driver has
// (docs/benchmarks.md).
func BenchmarkReleasedAdd(b *testing.B) {
	r := releasedIDs{at: make(map[string]time.Time)}
	const window = 50_000
	step := releasedKeep / window
	now := time.Now()
	ids := make([]string, 2*window)
	for i := range ids {
		ids[i] = fmt.Sprint("id", i)
	}
	for i := range window {
		r.add(ids[i], now.Add(time.Duration(i)*step))
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r.add(ids[i%len(ids)], now.Add(time.Duration(window+i)*step))
	}
}

package drivertest

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dlockio/dlock/driver"
)

// queueListTests is the QueueList group: the promises of
// driver.QueueLister, run on every driver that implements it (skipped on
// the others).
var queueListTests = []subtest{
	{"List", testQueueList, true},
}

// wantQueue is what ListQueues should report of one name: its holders'
// ids and modes (exclusive included), and its waiters' ids in order.
type wantQueue struct {
	holders map[string]driver.Mode
	waiters []string
}

// testQueueList: ListQueues returns exactly the names under a literal
// prefix that have readers, permits or waiters, each with its holders and
// waiters; a name held only exclusively is not one, and a name whose
// queued leases are gone disappears.
func testQueueList(t *testing.T, h Harness) {
	e := newQEnv(t, h)
	ql, ok := e.d.(driver.QueueLister)
	if !ok {
		t.Skip("driver does not implement driver.QueueLister")
	}
	ttl := e.ttl(longTTL)
	p := e.key("p/")
	rw, sem, fair, glob := p+"rw", p+"sem", p+"fair", p+"[x]*"

	r1 := e.granted(rw, driver.ModeShared, 0)
	r2 := e.granted(rw, driver.ModeShared, 0)
	writer := e.queued(rw, driver.ModeExclusive, 0, ttl)
	p1 := e.granted(sem, driver.ModePermit, 2)
	p2 := e.granted(sem, driver.ModePermit, 2)
	p3 := e.queued(sem, driver.ModePermit, 2, ttl)
	plain := e.acquire(fair, ttl)
	fw := e.queued(fair, driver.ModeExclusive, 0, ttl)
	g := e.granted(glob, driver.ModeShared, 0)
	e.acquire(p+"plain-only", ttl)              // held only exclusively: not a queued name
	e.granted(e.key("p"), driver.ModeShared, 0) // the prefix without its slash
	e.releaseKind(driver.KindRead, e.granted(p+"gone", driver.ModeShared, 0))

	all := map[string]wantQueue{
		rw:   {map[string]driver.Mode{r1.id: driver.ModeShared, r2.id: driver.ModeShared}, []string{writer.id}},
		sem:  {map[string]driver.Mode{p1.id: driver.ModePermit, p2.id: driver.ModePermit}, []string{p3.id}},
		fair: {map[string]driver.Mode{plain.id: driver.ModeExclusive}, []string{fw.id}},
		glob: {map[string]driver.Mode{g.id: driver.ModeShared}, nil},
	}
	e.checkQueueList(ql, p, all)
	e.checkQueueList(ql, p+"[", map[string]wantQueue{glob: all[glob]})
	e.checkQueueList(ql, p+"*", nil)
	e.checkQueueList(ql, e.key("nothing/"), nil)

	// Emptied names disappear: the readers and their waiting writer leave
	// rw; fair's waiter leaves, which leaves fair held only exclusively.
	e.releaseKind(driver.KindWaiter, writer)
	e.releaseKind(driver.KindRead, r1)
	e.releaseKind(driver.KindRead, r2)
	e.releaseKind(driver.KindWaiter, fw)
	delete(all, rw)
	delete(all, fair)
	e.checkQueueList(ql, p, all)
}

// checkQueueList checks that ListQueues(prefix) reports exactly want.
func (e *qenv) checkQueueList(ql driver.QueueLister, prefix string, want map[string]wantQueue) {
	e.t.Helper()
	infos, err := ql.ListQueues(e.ctx, prefix)
	if err != nil {
		e.t.Fatalf("ListQueues(%q): %v", prefix, err)
	}
	var got []string
	for _, info := range infos {
		got = append(got, info.Key)
		w, ok := want[info.Key]
		if !ok {
			continue
		}
		holders := make(map[string]driver.Mode)
		for _, hi := range info.Holders {
			holders[hi.ID] = hi.Mode
			if hi.Owner != e.owner() || hi.TTL <= 0 {
				e.t.Errorf("ListQueues(%q): %q holder %s: owner %+v, TTL %v; want %+v and a TTL left",
					prefix, info.Key, hi.ID, hi.Owner, hi.TTL, e.owner())
			}
		}
		var waiters []string
		for _, wi := range info.Waiters {
			waiters = append(waiters, wi.ID)
			if wi.Owner != e.owner() || wi.TTL <= 0 {
				e.t.Errorf("ListQueues(%q): %q waiter %s: owner %+v, TTL %v", prefix, info.Key, wi.ID, wi.Owner, wi.TTL)
			}
		}
		if !maps.Equal(holders, w.holders) || !slices.Equal(waiters, w.waiters) {
			e.t.Errorf("ListQueues(%q): %q holders %v waiters %v; want %v and %v",
				prefix, info.Key, holders, waiters, w.holders, w.waiters)
		}
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(got)
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		e.t.Errorf("ListQueues(%q) names:\n  %s\nwant\n  %s", prefix, strings.Join(got, "\n  "), strings.Join(keys, "\n  "))
	}
}

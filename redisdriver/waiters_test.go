package redisdriver

import (
	"slices"
	"testing"

	"github.com/dlockio/dlock/driver"
)

// The Driver knows a waiter from its queued request until a request of
// its id is granted or released, or its inbox's watcher closes; only
// waiters of the inbox asked for are woken.
func TestQueuedWaiters(t *testing.T) {
	var q queuedWaiters
	wait := func(id, key, inbox string) driver.QueueRequest {
		return driver.QueueRequest{Key: key, ID: id, Wait: true, Inbox: inbox}
	}
	queued := driver.QueueResult{Queued: true}
	q.answered(wait("a", "k1", "in1"), queued, nil)
	q.answered(wait("b", "k2", "in1"), queued, nil)
	q.answered(wait("c", "k1", "in2"), queued, nil)
	q.answered(driver.QueueRequest{Key: "k3", ID: "d"}, queued, nil) // no Wait: not a waiter
	ids := func(inbox string) []string {
		var out []string
		for _, g := range q.wakeUps(inbox) {
			if g.Confirmed || g.Token != 0 {
				t.Errorf("wake-up %+v is not a bare announcement", g)
			}
			out = append(out, g.ID+"@"+g.Key)
		}
		slices.Sort(out)
		return out
	}
	if got := ids("in1"); !slices.Equal(got, []string{"a@k1", "b@k2"}) {
		t.Fatalf("in1 wakes %v", got)
	}
	q.answered(wait("a", "k1", "in1"), driver.QueueResult{Granted: true}, nil)
	q.released([]driver.ReleaseRequest{{Key: "k2", ID: "b", Kind: driver.KindWaiter}})
	if got := ids("in1"); len(got) != 0 {
		t.Fatalf("in1 wakes %v after its waiters were granted and released", got)
	}
	if got := ids("in2"); !slices.Equal(got, []string{"c@k1"}) {
		t.Fatalf("in2 wakes %v", got)
	}
	q.forgetInbox("in2")
	if got := ids("in2"); len(got) != 0 {
		t.Fatalf("in2 wakes %v after its watcher closed", got)
	}
}

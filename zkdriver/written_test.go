package zkdriver

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A waiter judges the leader's clock from its own node: the stamp of a
// write plus the time since that write's answer. A stat read while a
// renewal of the node is in flight shows the renewal's newer stamp, whose
// answer has not come: pairing it with the older answer put the estimate
// ahead of the leader by up to a renewal interval, enough to delete a live
// holder's node as expired. The estimate pairs a stamp only with its own
// write's answer.
func TestLeaderNowPairsAStampWithItsOwnAnswer(t *testing.T) {
	answered := time.Now().Add(-100 * time.Millisecond)
	renewed := written{mtime: 1_000, answered: answered}
	created := written{answered: answered}
	for _, tc := range []struct {
		name     string
		w        written
		st       zk.Stat
		min, max int64 // bounds of the estimate, in ms
	}{
		{"the stat shows the write answered", renewed, zk.Stat{Version: 1, Mtime: 1_000, Ctime: 10}, 1_100, 1_600},
		{"a newer write in flight", renewed, zk.Stat{Version: 2, Mtime: 5_000, Ctime: 10}, 1_100, 1_600},
		{"the creation answered", created, zk.Stat{Version: 0, Mtime: 900, Ctime: 900}, 1_000, 1_500},
		{"a write in flight after the creation", created, zk.Stat{Version: 1, Mtime: 5_000, Ctime: 900}, 1_000, 1_500},
		{"the creation's stamp known", written{mtime: 900, answered: answered}, zk.Stat{Version: 1, Mtime: 5_000, Ctime: 900}, 1_000, 1_500},
	} {
		if got := tc.w.leaderNow(&tc.st); got < tc.min || got > tc.max {
			t.Errorf("%s: leaderNow = %d, want within [%d, %d] (never the newer stamp's %d)", tc.name, got, tc.min, tc.max, tc.st.Mtime)
		}
	}
}

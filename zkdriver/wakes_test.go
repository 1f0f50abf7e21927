package zkdriver

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// The release watch wakes waiters when the first node goes (or the watch
// is lost), not when its holder renews it (a data change). Before, every
// renewal woke the name's plain waiters, each of which made a whole
// attempt for nothing.
func TestWhatWakesWaiters(t *testing.T) {
	for ev, want := range map[zk.EventType]bool{
		zk.EventNodeDeleted:         true,
		zk.EventNotWatching:         true,
		zk.EventNodeDataChanged:     false,
		zk.EventNodeCreated:         false,
		zk.EventNodeChildrenChanged: false,
	} {
		if got := wakes(ev); got != want {
			t.Errorf("wakes(%v) = %v, want %v", ev, got, want)
		}
	}
}

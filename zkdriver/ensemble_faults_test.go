package zkdriver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
)

// fencedLog is what clients cycling one lock record as they enter it: the
// tokens in entry order, and whether two ever believed they held it.
type fencedLog struct {
	inside   atomic.Int32
	overlaps atomic.Int32
	mu       sync.Mutex
	tokens   []uint64
	stale    int // entries whose token was not above every earlier one
}

func (f *fencedLog) enter(token uint64) {
	if f.inside.Add(1) > 1 {
		f.overlaps.Add(1)
	}
	f.mu.Lock()
	if n := len(f.tokens); n > 0 && token <= f.tokens[n-1] {
		f.stale++
	}
	f.tokens = append(f.tokens, token)
	f.mu.Unlock()
}

func (f *fencedLog) leave() { f.inside.Add(-1) }

func (f *fencedLog) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens)
}

// TestEnsembleKills: clients cycling one lock on a 3-node ensemble while
// its leader, then a follower, is killed with SIGKILL and restarted: no
// two holders at once, tokens strictly increasing in entry order (a
// fenced resource would accept every write and no stale one), and cycles
// go on after each fault.
func TestEnsembleKills(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	var log fencedLog
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		c, _ := faultClient(t, e.Servers(), "/kills")
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				l, err := c.Lock(lctx, "k")
				cancel()
				if err != nil {
					continue // a fault in progress, or the end
				}
				if l.Err() == nil {
					log.enter(l.Token())
					time.Sleep(time.Millisecond)
					log.leave()
				}
				_ = l.Unlock(context.Background())
			}
		})
	}
	progress := func(what string) {
		t.Helper()
		before := log.count()
		deadline := time.Now().Add(20 * time.Second)
		for log.count() < before+20 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d cycles in 20 s", what, log.count()-before)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	progress("before any fault")
	leader, err := e.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	progress(fmt.Sprintf("leader %d killed", leader.ID()))
	leader.Restart()
	var follower *zkserver.Node
	for _, nd := range e.Nodes {
		if m, err := nd.Mode(); err == nil && m == "follower" {
			follower = nd
			break
		}
	}
	if follower == nil {
		t.Fatal("no follower")
	}
	follower.Kill()
	progress(fmt.Sprintf("follower %d killed", follower.ID()))
	follower.Restart()
	progress("all restarted")
	stop()
	wg.Wait()
	if n := log.overlaps.Load(); n > 0 {
		t.Errorf("%d entries while another client believed it held the lock", n)
	}
	if log.stale > 0 {
		t.Errorf("%d of %d entries with a token not above the previous one's", log.stale, log.count())
	}
	t.Logf("%d cycles, 0 overlaps, tokens increasing", log.count())
}

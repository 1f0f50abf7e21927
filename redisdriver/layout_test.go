package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// The errors that say a Cluster client's layout may be stale start a
// reload; the server's other answers, the caller's cancellation and the
// driver's own errors do not.
func TestStaleLayoutErrors(t *testing.T) {
	ctx := context.Background()
	nodes := redisserver.StartCluster(t, 2)
	// A key of the second node's slots, asked of the first: MOVED.
	var moved error
	for i := 0; moved == nil; i++ {
		moved = nodes[0].Client(t).Get(ctx, fmt.Sprintf("k%d", i)).Err()
		if errors.Is(moved, redis.Nil) {
			moved = nil
		}
	}
	// A cluster node that serves no slot: CLUSTERDOWN.
	lone := redisserver.Start(t, redisserver.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
	down := lone.Client(t).Get(ctx, "k").Err()
	// A port nobody listens on: a refused connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	rc := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, MaxRetries: -1})
	refused := rc.Get(ctx, "k").Err()
	_ = rc.Close()
	unknown := nodes[0].Client(t).Do(ctx, "NOSUCHCOMMAND").Err()

	for _, c := range []struct {
		name  string
		err   error
		stale bool
	}{
		{"MOVED", moved, true},
		{"CLUSTERDOWN", down, true},
		{"connection refused", refused, true},
		{"EOF", fmt.Errorf("read: %w", io.EOF), true},
		{"unknown command", unknown, false},
		{"nil reply", redis.Nil, false},
		{"cancelled", fmt.Errorf("call: %w", context.Canceled), false},
		{"deadline", context.DeadlineExceeded, false},
		{"invalid", driver.ErrInvalid, false},
		{"none", nil, false},
	} {
		if got := staleLayout(c.err); got != c.stale {
			t.Errorf("%s (%v): stale %v, want %v", c.name, c.err, got, c.stale)
		}
	}
}

// While a master is down and its slots are not taken over, many calls
// failing at once reload the layout one at a time, reloadGap apart: the
// nodes that still answer are asked for the layout (CLUSTER SLOTS) no
// more often than that. Close stops the reloads.
func TestLayoutReloadsAreSpaced(t *testing.T) {
	nodes := redisserver.StartCluster(t, 3)
	rdb := newClusterClient(t, nodes)
	d := newDriver(t, rdb)
	ctx := context.Background()
	// A name on the last node's slots.
	name := ""
	for i := 0; name == ""; i++ {
		n := fmt.Sprintf("spaced:%d", i)
		if int(slot(d.lockKey(n)))*3/16384 == 2 {
			name = n
		}
	}
	mustAcquire(t, d, "warm-up", "a") // the client's first layout
	nodes[2].Kill()
	before := 0
	for _, n := range nodes[:2] {
		before += commandStats(t, n.Client(t))["cluster|slots"].calls
	}

	start := time.Now()
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for time.Since(start) < 2*time.Second {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := d.Acquire(cctx, driver.AcquireRequest{Key: name, ID: fmt.Sprintf("g%d", g), TTL: time.Second})
				cancel()
				if err == nil {
					t.Error("acquired a lock on a dead master")
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := 0
	for _, n := range nodes[:2] {
		after += commandStats(t, n.Client(t))["cluster|slots"].calls
	}
	// One reload at the first failure, then one per reloadGap: at most
	// five a second however many calls fail (back to back, the reloads
	// number in the hundreds here).
	most := int(elapsed/(200*time.Millisecond)) + 2
	t.Logf("%d layout reloads in %v", after-before, elapsed.Round(time.Millisecond))
	if got := after - before; got < 1 || got > most {
		t.Errorf("%d layout reloads in %v, want 1 to %d", got, elapsed.Round(time.Millisecond), most)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d.layout.mu.Lock()
	running := d.layout.running
	d.layout.mu.Unlock()
	if running {
		t.Error("layout still reloading after Close")
	}
}

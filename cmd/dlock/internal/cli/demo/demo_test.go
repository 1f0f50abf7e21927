package demo

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunEmbedded(t *testing.T) {
	var progress bytes.Buffer
	rep, err := Run(t.Context(), Config{Workers: 3, Orders: 8, TTL: 200 * time.Millisecond, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	n, d := rep.Naive, rep.Dlock
	t.Logf("naive %+v\ndlock %+v", n, d)
	if rep.SlowOrders != 1 || rep.Freezes != 1 {
		t.Fatalf("plan: %d slow, %d freezes; want 1 and 1", rep.SlowOrders, rep.Freezes)
	}
	if n.Violations() == 0 || n.Overlaps == 0 {
		t.Error("the naive lock showed no violation")
	}
	if d.Violations() != 0 || d.ForeignDeletes != 0 || d.TokenRegressions != 0 {
		t.Error("dlock let a violation through")
	}
	if d.Overlaps > 0 && d.StaleRejected == 0 {
		t.Errorf("dlock: %d overlaps, yet fencing rejected nothing", d.Overlaps)
	}
	if n.OrdersCompleted != 8 || d.OrdersCompleted != 8 {
		t.Errorf("completed: naive %d, dlock %d", n.OrdersCompleted, d.OrdersCompleted)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders processed more than once", "stale writes rejected by fencing", "naive lock", "dlock"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if !strings.Contains(progress.String(), "dlock: done") {
		t.Errorf("no progress shown:\n%s", progress.String())
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Workers: 1, Orders: 10, TTL: DefaultTTL},
		{Workers: 4, Orders: 0, TTL: DefaultTTL},
		{Workers: 4, Orders: 10, TTL: time.Millisecond},
	} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", c, err)
		}
	}
	if err := (Config{Workers: DefaultWorkers, Orders: DefaultOrders, TTL: DefaultTTL}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestOrderDBFencing(t *testing.T) {
	db := newOrderDB(1)
	e1, done, err := db.begin(0, 10)
	if err != nil || done {
		t.Fatal(done, err)
	}
	e2, _, err := db.begin(0, 20) // the lock passed on while 10 was paused
	if err != nil {
		t.Fatal(err)
	}
	if err := db.commit(0, e2, 20); err != nil {
		t.Fatal(err)
	}
	if err := db.commit(0, e1, 10); !errors.Is(err, errFenced) {
		t.Fatalf("stale commit: %v, want errFenced", err)
	}
	if _, _, err := db.begin(0, 15); !errors.Is(err, errFenced) {
		t.Fatalf("stale begin: %v, want errFenced", err)
	}
	if _, done, _ := db.begin(0, 30); !done {
		t.Fatal("processed order not reported done")
	}
	if completed, twice := db.tally(); completed != 1 || twice != 0 {
		t.Fatalf("tally %d %d", completed, twice)
	}

	// Without tokens nothing can be refused, but staleness is still seen.
	naive := newOrderDB(1)
	n1, _, _ := naive.begin(0, 0)
	n2, _, _ := naive.begin(0, 0)
	_ = naive.commit(0, n2, 0)
	_ = naive.commit(0, n1, 0)
	if accepted, rejected := naive.fencing(); accepted != 1 || rejected != 0 {
		t.Fatalf("naive: %d stale accepted, %d rejected; want 1, 0", accepted, rejected)
	}
	if _, twice := naive.tally(); twice != 1 {
		t.Fatal("double processing not counted")
	}
}

func TestGateFreezesTraffic(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g := &gate{}
	c := g.wrap(a)
	frozen := make(chan struct{})
	go func() {
		close(frozen)
		g.freeze(context.Background(), 300*time.Millisecond)
	}()
	<-frozen
	for g.wait(time.Now()) == nil { // until the freeze has begun
		time.Sleep(time.Millisecond)
	}
	if err := c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write during a freeze: %v, want a timeout", err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	go func() { _, _ = b.Read(make([]byte, 1)) }()
	began := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(began); waited < 100*time.Millisecond {
		t.Fatalf("write went through after %v, during the freeze", waited)
	}
}

// checkGateStopsClient asserts that a freeze of g stops rdb's commands and
// that they go through again after it.
func checkGateStopsClient(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	g := &gate{}
	g.attach(rdb)
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("before the freeze: %v", err)
	}
	ctx, thaw := context.WithCancel(t.Context())
	frozen := make(chan struct{})
	go func() {
		defer close(frozen)
		g.freeze(ctx, time.Minute)
	}()
	for g.wait(time.Now()) == nil { // until the freeze has begun
		time.Sleep(time.Millisecond)
	}
	pctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := rdb.Ping(pctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a command went through during the freeze")
	}
	thaw()
	<-frozen
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("after the freeze: %v", err)
	}
}

func TestGateAttachStandalone(t *testing.T) {
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	checkGateStopsClient(t, rdb)
}

func TestGateAttachCluster(t *testing.T) {
	nodes := redisserver.StartCluster(t, 1)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr()}, ContextTimeoutEnabled: true})
	defer rdb.Close()
	checkGateStopsClient(t, rdb)
}

func TestValidateURL(t *testing.T) {
	c := Config{Workers: DefaultWorkers, Orders: DefaultOrders, TTL: DefaultTTL, URL: "redis+sentinel://:s3cret@s1:26379"} // no master name
	err := c.Validate()
	if !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Validate = %v, want ErrConfig without the password", err)
	}
	c.URL = "redis://127.0.0.1:6379/0"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

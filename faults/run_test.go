package faults

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// mode sizes the suite: short by default, full with DLOCK_FAULTS_FULL=1.
type mode struct {
	full    bool
	workers int
	iters   int // per worker
}

func suiteMode() mode {
	if os.Getenv("DLOCK_FAULTS_FULL") == "1" {
		return mode{full: true, workers: 5, iters: 20}
	}
	return mode{workers: 3, iters: 5}
}

// run is one scenario against one lock implementation. Its fields are used
// on the test goroutine only; workers talk to it through the hub.
type run struct {
	t     *testing.T
	sc    scenario
	kind  string
	m     mode
	hub   *hub
	dir   string
	fence *redisserver.Server

	store   *redisserver.Server // the lock store workers use now
	replica *redisserver.Server // failover: the next master
	link    *redisserver.Proxy  // failover: replication link to the replica
	dial    func(name string) string

	procs   map[string]*proc
	iters   map[string]int
	proxies map[string]*switchProxy
	lagged  map[string]*redisserver.Proxy
	spawned int

	roles       []string // shared_test.go: worker i takes roles[i % len(roles)]
	permits     int
	workerRoles map[string]string // worker name -> role
}

func newRun(t *testing.T, sc scenario, kind string, m mode) *run {
	r := &run{
		t: t, sc: sc, kind: kind, m: m, hub: newHub(), dir: t.TempDir(),
		fence:   redisserver.Start(t),
		procs:   map[string]*proc{},
		iters:   map[string]int{},
		proxies: map[string]*switchProxy{},
		lagged:  map[string]*redisserver.Proxy{},
	}
	// By default each worker reaches the lock store through its own proxy,
	// so that one worker can be cut off or all moved to another server.
	r.dial = func(name string) string {
		p := newSwitchProxy(t, r.store.Addr())
		r.proxies[name] = p
		return p.Addr()
	}
	return r
}

// faults is how many faults to inject in this mode.
func (r *run) faults() int {
	if r.m.full {
		return r.sc.faults[1]
	}
	return r.sc.faults[0]
}

// patience bounds every wait for an event the scenario expects.
func (r *run) patience() time.Duration { return 4*r.sc.ttl + 3*time.Second }

// stallAfter is how long the lock may go without any acquisition before the
// harness declares it stuck (and ends the run). One worker waiting long is
// not enough: no lock here promises fairness, and under load a waiter can
// lose the race many times in a row.
func (r *run) stallAfter() time.Duration { return 4*r.sc.ttl + 2*time.Second }

// spawn starts a new worker doing iters iterations.
func (r *run) spawn(iters int) {
	name := fmt.Sprintf("w%d", r.spawned)
	cfg := workerConfig{
		Name: name, Kind: r.kind, LockAddr: r.dial(name), FenceAddr: r.fence.Addr(),
		Iters: iters, TTL: r.sc.ttl, Hold: r.sc.hold, Think: r.sc.think(), GiveUp: 10 * time.Minute,
	}
	if len(r.roles) > 0 {
		cfg.Role, cfg.Permits = r.roles[r.spawned%len(r.roles)], r.permits
		if r.workerRoles == nil {
			r.workerRoles = map[string]string{}
		}
		r.workerRoles[name] = cfg.Role
	}
	r.spawned++
	r.procs[name] = startWorker(r.t, r.hub, r.dir, cfg)
	r.iters[name] = iters
}

// note records something the harness did, stamped after doing it.
func (r *run) note(kind, worker, what string) {
	r.hub.add(event{K: kind, W: worker, T: now(), N: what})
}

// fault records an injected fault.
func (r *run) fault(worker, what string) { r.note(evFault, worker, what) }

// signal sends sig to a worker and records it.
func (r *run) signal(worker string, sig syscall.Signal, kind string) {
	r.procs[worker].signal(sig)
	r.note(kind, worker, sig.String())
}

func isRead(e event) bool { return e.K == evRead && e.OK }
func isAcq(e event) bool  { return e.K == evAcq }

func endOf(acq string) func(event) bool {
	return func(e event) bool { return e.K == evEnd && e.A == acq }
}

// execute runs the scenario and checks the history.
func (r *run) execute() result {
	t := r.t
	r.sc.setup(r)
	for range r.m.workers {
		r.spawn(r.m.iters)
	}
	r.sc.inject(r)
	r.awaitWorkers()
	for _, p := range r.procs {
		if !p.killed.Load() && p.err != nil {
			t.Errorf("worker %s: %v; stderr:\n%s", p.name, p.err, p.stderrTail())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, final, err := fenceClient{redisserver.NewClient(t, r.fence.Addr())}.history(ctx)
	if err != nil {
		t.Fatalf("reading the register: %v", err)
	}
	res := check(r.hub.snapshot(), log, final, r.leakedKeys(ctx))
	t.Logf("%s on %s: %v", r.sc.name, r.kind, res)
	// The history explains any failure, including those the caller finds.
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("DLOCK_FAULTS_TRACE") == "" {
			return
		}
		for _, e := range r.hub.snapshot() {
			t.Logf("%+v", e)
		}
		for _, p := range r.procs {
			t.Logf("stderr of %s:\n%s", p.name, p.stderrTail())
		}
	})
	return res
}

// awaitWorkers waits for every worker to finish. If the lock makes no
// progress for stallAfter, or the run exceeds its budget, it records that and
// kills the workers.
func (r *run) awaitWorkers() {
	budget := time.Duration(r.m.workers*r.m.iters)*2*(r.sc.ttl+r.sc.hold) + 30*time.Second
	deadline := time.Now().Add(budget)
	from := len(r.hub.snapshot())
	for r.hub.running() > 0 {
		var ok bool
		if _, from, ok = r.hub.waitFor(from, r.stallAfter(), isAcq); ok && time.Now().Before(deadline) {
			continue
		}
		if r.hub.running() == 0 {
			break
		}
		if time.Now().Before(deadline) {
			r.note(evStuck, "", fmt.Sprintf("no acquisition for %v", r.stallAfter()))
		} else {
			r.t.Errorf("workers still running after %v", budget)
		}
		for _, p := range r.procs {
			p.signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

// leakedKeys lists keys in the lock store that will never expire. dlock
// keeps nothing beyond a TTL (its fencing tokens live in the lock value and
// the last released value), so every such key is a leak.
func (r *run) leakedKeys(ctx context.Context) []string {
	rdb := redisserver.NewClient(r.t, r.store.Addr())
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		r.t.Fatalf("listing keys: %v", err)
	}
	var leaked []string
	for _, k := range keys {
		if ttl, err := rdb.PTTL(ctx, k).Result(); err == nil && ttl == -1 {
			leaked = append(leaked, k)
		}
	}
	return leaked
}

// startReplica starts a replica of master behind a replication link that
// lags by lag, once the replica has caught up.
func (r *run) startReplica(master *redisserver.Server, lag time.Duration) (*redisserver.Server, *redisserver.Proxy) {
	t := r.t
	link := redisserver.NewProxy(t, master.Addr())
	_, port, _ := net.SplitHostPort(link.Addr())
	rep := redisserver.Start(t, redisserver.WithArgs("--replicaof", "127.0.0.1", port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rdb := redisserver.NewClient(t, master.Addr())
	if err := rdb.Set(ctx, "harness:sync", strconv.Itoa(r.spawned), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT returns once the replica acknowledged everything written so far.
	if n, err := rdb.Do(ctx, "WAIT", 1, 15000).Int(); err != nil || n != 1 {
		t.Fatalf("replica did not sync: %d %v", n, err)
	}
	link.SetLatency(lag)
	return rep, link
}

// failover kills the master before the replica received its last writes,
// promotes the replica and moves every worker to it.
func (r *run) failover(ctx context.Context) {
	r.link.Close() // the lagging replication stream is cut: the replica never sees the last writes
	r.store.Kill()
	if err := redisserver.NewClient(r.t, r.replica.Addr()).Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		r.t.Fatalf("promoting the replica: %v", err)
	}
	r.store, r.replica, r.link = r.replica, nil, nil
	for _, p := range r.proxies {
		p.SetTarget(r.store.Addr())
		p.CloseAll()
	}
}

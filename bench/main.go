// Command bench measures dlock side by side with other Go lock libraries on
// the same Redis (and etcd) server: lock/unlock throughput and latency
// without and with contention, handoff latency and lock utilization, and
// the cost of holding many auto-renewed leases. It prints one markdown
// table per workload.
//
//	go run . [-duration 5s] [-workloads serial,uncontended,...] [-peers dlock,raw,...] [-smoke]
//
// It starts its own redis-server and etcd on free loopback ports unless
// -redis points at a server; that server is flushed between runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// bench holds the settings and shared state of one benchmark run.
type bench struct {
	env
	duration   time.Duration
	rounds     int
	heldCounts []int
	heldTTL    time.Duration
	heldWindow time.Duration

	admin  *redis.Client  // flushes and reads INFO
	etcd   *server        // nil when etcd is not running
	quorum *quorumServers // nil unless a quorum peer runs (quorum.go)
	zk     *zkEnsemble    // nil unless a ZooKeeper peer runs (zk.go)
	log    io.Writer

	results map[string]map[string]cycleResult // workload -> peer -> result
	held    map[string]map[int]heldResult     // peer -> leases -> result
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "# "+format+"\n", args...)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are bench's command-line flags.
type options struct {
	duration, ttl, retry, heldTTL, heldWindow time.Duration
	rounds                                    int
	workloads, peers, heldN                   string
	redisAddr, cpuProfile                     string
}

func parseOptions() options {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per peer and cycle workload, split into rounds")
	flag.IntVar(&o.rounds, "rounds", 10, "interleaved rounds per cycle workload")
	flag.StringVar(&o.workloads, "workloads", "serial,uncontended,handoff,contended,held", "comma-separated workloads to run (also: rwlock, semaphore)")
	flag.StringVar(&o.peers, "peers", "dlock,dlock-plain,raw,redislock,redsync,rueidislock,etcd,dlock-etcd,dlock-etcd-plain", "comma-separated peers to run")
	smoke := flag.Bool("smoke", false, "run every workload briefly with small lease counts (for CI)")
	flag.StringVar(&o.redisAddr, "redis", "", "use this Redis server (host:port; it is flushed) instead of starting one")
	flag.DurationVar(&o.ttl, "ttl", 10*time.Second, "lock TTL in the cycle workloads")
	flag.DurationVar(&o.retry, "retry", 10*time.Millisecond, "retry delay of polling peers")
	flag.StringVar(&o.heldN, "held-n", "10000,100000", "comma-separated lease counts of the held workload")
	flag.DurationVar(&o.heldTTL, "held-ttl", 30*time.Second, "lease TTL in the held workload (renewed every TTL/3)")
	flag.DurationVar(&o.heldWindow, "held-window", 30*time.Second, "how long the held workload keeps its leases")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *smoke {
		o.duration, o.rounds, o.heldN, o.heldTTL, o.heldWindow = 200*time.Millisecond, 1, "200,1000", 600*time.Millisecond, time.Second
	}
	return o
}

func run() error {
	o := parseOptions()
	b, peers, wanted, err := newBench(o)
	if err != nil {
		return err
	}
	peers, notes, stop, err := b.startServers(o.redisAddr, peers)
	if err != nil {
		return err
	}
	defer stop()
	b.reset()
	if o.cpuProfile != "" {
		stopProfile, err := startProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	b.runWorkloads(os.Stdout, peers, wanted, notes, o.retry)
	return nil
}

// newBench checks o's lists and returns the bench they describe, with
// its peers and the names of its workloads.
func newBench(o options) (*bench, []peer, []string, error) {
	b := &bench{
		env:      env{ttl: o.ttl, retryDelay: o.retry},
		duration: o.duration, rounds: max(1, o.rounds), heldTTL: o.heldTTL, heldWindow: o.heldWindow,
		log:     os.Stderr,
		results: make(map[string]map[string]cycleResult),
		held:    make(map[string]map[int]heldResult),
	}
	for _, s := range splitList(o.heldN) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, nil, nil, fmt.Errorf("bad -held-n entry %q", s)
		}
		b.heldCounts = append(b.heldCounts, n)
	}
	peers, err := selectPeers(splitList(o.peers))
	if err != nil {
		return nil, nil, nil, err
	}
	wanted := splitList(o.workloads)
	for _, w := range wanted {
		if w != "held" && !slices.Contains(sharedWorkloads, w) && !slices.ContainsFunc(cycleWorkloads, func(s cycleSpec) bool { return s.name == w }) {
			return nil, nil, nil, fmt.Errorf("unknown workload %q", w)
		}
	}
	return b, peers, wanted, nil
}

// startServers starts redis-server, unless redisAddr names one, and etcd
// when a peer needs it. Without etcd its peers are dropped, with a note
// for the report saying why. stop stops what was started, in reverse
// order.
func (b *bench) startServers(redisAddr string, peers []peer) (_ []peer, notes []string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	b.redisAddr = redisAddr
	if b.redisAddr == "" {
		srv, err := startRedis()
		if err != nil {
			return nil, nil, nil, err
		}
		stops = append(stops, srv.stop)
		stopOnSignal(srv)
		b.redisAddr = srv.addr
	}
	b.admin = redis.NewClient(&redis.Options{Addr: b.redisAddr})
	stops = append(stops, func() { _ = b.admin.Close() })
	if slices.ContainsFunc(peers, func(p peer) bool { return p.replica }) {
		r, err := startReplica(b.redisAddr) // replica.go
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		stops = append(stops, r.stop)
		stopOnSignal(r)
	}
	if slices.ContainsFunc(peers, func(p peer) bool { return p.quorum }) {
		q, err := startQuorum(b.ttl)
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		stops = append(stops, q.stop)
		b.quorum, b.quorumAddrs = q, q.addrs()
	}
	if slices.ContainsFunc(peers, func(p peer) bool { return p.zk }) {
		e, err := startZK() // zk.go
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("ZooKeeper peers skipped: the ensemble did not start: %v", err))
		case e == nil:
			notes = append(notes, "ZooKeeper peers skipped: no ZooKeeper (Debian package zookeeper) or java found")
		default:
			stops = append(stops, e.stop)
			b.zk, b.zkServers = e, e.servers()
		}
		if b.zk == nil {
			peers = slices.DeleteFunc(peers, func(p peer) bool { return p.zk })
		}
	}
	if !slices.ContainsFunc(peers, func(p peer) bool { return p.etcd }) {
		return peers, notes, stop, nil
	}
	srv, err := startEtcd()
	switch {
	case err != nil:
		notes = append(notes, fmt.Sprintf("etcd peers skipped: etcd did not start: %v", err))
	case srv == nil:
		notes = append(notes, "etcd peers skipped: no etcd binary found")
	default:
		stops = append(stops, srv.stop)
		stopOnSignal(srv)
		b.etcd, b.etcdAddr = srv, srv.addr
	}
	if b.etcd == nil {
		peers = slices.DeleteFunc(peers, func(p peer) bool { return p.etcd })
	}
	return peers, notes, stop, nil
}

// startProfile writes a CPU profile to path until the returned function
// is called.
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// runWorkloads runs the wanted workloads and writes their tables to out,
// after the report's header and before its targets.
func (b *bench) runWorkloads(out io.Writer, peers []peer, wanted, notes []string, retry time.Duration) {
	b.header(out, peers, os.Args[1:], notes)
	for _, spec := range cycleWorkloads {
		if slices.Contains(wanted, spec.name) {
			handoffTracer.reset()
			b.runCycleWorkload(spec, peers).write(out)
			if bd := handoffBreakdown(); spec.name == "handoff" && bd != nil {
				bd.write(out)
			}
		}
	}
	if slices.Contains(wanted, "held") {
		b.runHeldWorkload(peers).write(out)
	}
	// shared.go: dlock against its raw Lua baseline, whatever -peers says.
	if slices.Contains(wanted, "rwlock") {
		b.runRWWorkload(sharedPeers(retry)).write(out)
	}
	if slices.Contains(wanted, "semaphore") {
		b.runSemWorkload(sharedPeers(retry)).write(out)
	}
	b.targets(out)
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func selectPeers(names []string) ([]peer, error) {
	all := append(append(append(append(allPeers(), diagnosticPeers()...), quorumPeers()...), replicaPeers()...), zkPeers()...)
	var out []peer
	for _, p := range all {
		if slices.Contains(names, p.name) {
			out = append(out, p)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(all, func(p peer) bool { return p.name == n }) {
			return nil, fmt.Errorf("unknown peer %q", n)
		}
	}
	return out, nil
}

// reset empties the stores between runs so no run pays for another's keys
// (dlock's release markers, for one, live for a minute).
func (b *bench) reset() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		b.logf("flush failed: %v", err)
	}
	if b.quorum != nil {
		if err := b.quorum.flush(ctx); err != nil {
			b.logf("quorum flush failed: %v", err)
		}
	}
	runtime.GC()
}

// usage is what the peer's clients and its store did during a measured
// interval (or, from snapshot, counters at one instant).
type usage struct {
	hasCommands bool
	commands    int64   // store commands, including those run by scripts
	trips       int64   // client requests (pipelines once) plus (un)subscribes
	storeCPU    float64 // seconds
	clientCPU   time.Duration
}

func (u usage) sub(before usage) usage {
	return usage{
		hasCommands: u.hasCommands,
		commands:    u.commands - before.commands,
		trips:       u.trips - before.trips,
		storeCPU:    u.storeCPU - before.storeCPU,
		clientCPU:   u.clientCPU - before.clientCPU,
	}
}

func (u usage) add(o usage) usage {
	return usage{
		hasCommands: u.hasCommands || o.hasCommands,
		commands:    u.commands + o.commands,
		trips:       u.trips + o.trips,
		storeCPU:    u.storeCPU + o.storeCPU,
		clientCPU:   u.clientCPU + o.clientCPU,
	}
}

func (u usage) cmdsPerCycle(cycles int64) string {
	if !u.hasCommands || cycles == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(u.commands)/float64(cycles))
}

func (u usage) tripsPerCycle(cycles int64) string {
	if cycles == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(u.trips)/float64(cycles))
}

func (u usage) storeCPUPerCycle(cycles int64) string {
	if cycles == 0 {
		return "–"
	}
	return fmtDur(time.Duration(u.storeCPU / float64(cycles) * float64(time.Second)))
}

func (u usage) clientCPUPerCycle(cycles int64) string {
	if cycles == 0 {
		return "–"
	}
	return fmtDur(u.clientCPU / time.Duration(cycles))
}

// snapshot reads the counters of this process and of the store p uses.
func (b *bench) snapshot(p peer) usage {
	u := usage{clientCPU: processCPU()}
	if p.zk {
		cpu, err := b.zk.cpuSeconds()
		if err != nil {
			b.logf("ZooKeeper cpu: %v", err)
		}
		u.storeCPU, u.trips = cpu, roundTrips.Load()
		return u
	}
	if p.etcd {
		cpu, err := b.etcd.cpuSeconds()
		if err != nil {
			b.logf("etcd cpu: %v", err)
		}
		u.storeCPU = cpu
		u.trips = roundTrips.Load()
		return u
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p.quorum {
		commands, subs, cpu, err := b.quorum.usage(ctx)
		if err != nil {
			b.logf("quorum INFO: %v", err)
		}
		u.trips = roundTrips.Load() + subs
		u.hasCommands, u.commands, u.storeCPU = true, commands, cpu
		return u
	}
	s, err := readRedisStats(ctx, b.admin)
	if err != nil {
		b.logf("redis INFO: %v", err)
	}
	u.trips = roundTrips.Load() + s.subs
	// INFO counts itself: take the call that read this snapshot off.
	u.hasCommands, u.commands, u.storeCPU = true, s.commands-1, s.cpu
	return u
}

func (b *bench) record(workload, peerName string, r cycleResult) {
	if b.results[workload] == nil {
		b.results[workload] = make(map[string]cycleResult)
	}
	b.results[workload][peerName] = r
}

func (b *bench) recordHeld(peerName string, r heldResult) {
	if b.held[peerName] == nil {
		b.held[peerName] = make(map[int]heldResult)
	}
	b.held[peerName][r.n] = r
}

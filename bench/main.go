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

	admin *redis.Client // flushes and reads INFO
	etcd  *server       // nil when etcd is not running
	log   io.Writer

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

func run() error {
	var (
		duration   = flag.Duration("duration", 5*time.Second, "measured time per peer and cycle workload, split into rounds")
		rounds     = flag.Int("rounds", 10, "interleaved rounds per cycle workload")
		workloads  = flag.String("workloads", "serial,uncontended,handoff,contended,held", "comma-separated workloads to run (also: rwlock, semaphore)")
		peersFlag  = flag.String("peers", "dlock,dlock-plain,raw,redislock,redsync,rueidislock,etcd,dlock-etcd", "comma-separated peers to run")
		smoke      = flag.Bool("smoke", false, "run every workload briefly with small lease counts (for CI)")
		redisAddr  = flag.String("redis", "", "use this Redis server (host:port; it is flushed) instead of starting one")
		ttl        = flag.Duration("ttl", 10*time.Second, "lock TTL in the cycle workloads")
		retry      = flag.Duration("retry", 10*time.Millisecond, "retry delay of polling peers")
		heldN      = flag.String("held-n", "10000,100000", "comma-separated lease counts of the held workload")
		heldTTL    = flag.Duration("held-ttl", 30*time.Second, "lease TTL in the held workload (renewed every TTL/3)")
		heldWindow = flag.Duration("held-window", 30*time.Second, "how long the held workload keeps its leases")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	flag.Parse()
	if *smoke {
		*duration, *rounds, *heldN, *heldTTL, *heldWindow = 200*time.Millisecond, 1, "200,1000", 600*time.Millisecond, time.Second
	}
	b := &bench{
		env:      env{ttl: *ttl, retryDelay: *retry},
		duration: *duration, rounds: max(1, *rounds), heldTTL: *heldTTL, heldWindow: *heldWindow,
		log:     os.Stderr,
		results: make(map[string]map[string]cycleResult),
		held:    make(map[string]map[int]heldResult),
	}
	for _, s := range splitList(*heldN) {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -held-n entry %q", s)
		}
		b.heldCounts = append(b.heldCounts, n)
	}
	peers, err := selectPeers(splitList(*peersFlag))
	if err != nil {
		return err
	}
	wanted := splitList(*workloads)
	for _, w := range wanted {
		if w != "held" && !slices.Contains(sharedWorkloads, w) && !slices.ContainsFunc(cycleWorkloads, func(s cycleSpec) bool { return s.name == w }) {
			return fmt.Errorf("unknown workload %q", w)
		}
	}

	b.redisAddr = *redisAddr
	if b.redisAddr == "" {
		srv, err := startRedis()
		if err != nil {
			return err
		}
		defer srv.stop()
		stopOnSignal(srv)
		b.redisAddr = srv.addr
	}
	b.admin = redis.NewClient(&redis.Options{Addr: b.redisAddr})
	defer b.admin.Close()
	var notes []string
	if slices.ContainsFunc(peers, func(p peer) bool { return p.etcd }) {
		srv, err := startEtcd()
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("etcd peers skipped: etcd did not start: %v", err))
		case srv == nil:
			notes = append(notes, "etcd peers skipped: no etcd binary found")
		default:
			defer srv.stop()
			stopOnSignal(srv)
			b.etcd, b.etcdAddr = srv, srv.addr
		}
		if b.etcd == nil {
			peers = slices.DeleteFunc(peers, func(p peer) bool { return p.etcd })
		}
	}
	b.reset()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	out := os.Stdout
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
		b.runRWWorkload(sharedPeers(*retry)).write(out)
	}
	if slices.Contains(wanted, "semaphore") {
		b.runSemWorkload(sharedPeers(*retry)).write(out)
	}
	b.targets(out)
	return nil
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
	all := append(allPeers(), diagnosticPeers()...)
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

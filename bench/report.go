package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// redisVersion asks the server for its version.
func (b *bench) redisVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := b.admin.Info(ctx, "server").Result()
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// header prints the machine, the versions and the settings of the run.
func (b *bench) header(w io.Writer, peers []peer, args, notes []string) {
	fmt.Fprintf(w, "## dlock side-by-side benchmark\n\n")
	fmt.Fprintf(w, "- command: `%s`\n", strings.TrimSpace("go run . "+strings.Join(args, " ")))
	fmt.Fprintf(w, "- machine: %d CPUs (%s), %s/%s, %s\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(w, "- redis-server %s on loopback", b.redisVersion())
	if b.etcd != nil {
		fmt.Fprintf(w, "; %s on loopback (data dir on the temp directory's file system)", etcdVersion())
	}
	if b.zk != nil {
		fmt.Fprintf(w, "; %s, a 3-node ensemble on loopback (tickTime %v, fsync on)", zkVersion(), zkBenchTick)
	}
	fmt.Fprintln(w)
	if p50, p99, err := b.pingRTT(); err == nil {
		fmt.Fprintf(w, "- calibration: Redis PING round trip (go-redis, one connection, back to back) p50 %s, p99 %s\n", fmtDur(p50), fmtDur(p99))
	}
	fmt.Fprintf(w, "- cycle workloads: %v measured per peer and workload, in %d interleaved round(s) of %v; lock TTL %v; every worker has its own client and connections (workers model separate processes)\n",
		b.duration, b.rounds, b.duration/time.Duration(b.rounds), b.ttl)
	fmt.Fprintf(w, "- polling peers retry every %v (documented retry delay)\n", b.retryDelay)
	fmt.Fprintln(w, "- how a blocked Lock waits:")
	for _, p := range peers {
		fmt.Fprintf(w, "  - %s: %s\n", p.name, p.waits)
	}
	fmt.Fprintln(w, "- overlaps: times a worker entered the critical section while another was inside (an atomic counter in the benchmark); must be 0")
	fmt.Fprintln(w, "- per completed cycle (failed attempts included): round trips = requests the clients sent (a pipeline counts once; Redis (un)subscribe calls added); store cmds = Redis total_commands_processed, which counts the commands scripts run; client CPU = this process's user+sys time; store CPU = the store server's user+sys time")
	for _, n := range notes {
		fmt.Fprintf(w, "- note: %s\n", n)
	}
}

// targets prints dlock's standing against the project's goals, for the
// workloads that ran.
func (b *bench) targets(w io.Writer) {
	t := &table{title: "dlock against its targets", head: []string{"target", "measured", "met"}}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	get := func(workload, name string) (cycleResult, bool) {
		r, ok := b.results[workload][name]
		return r, ok
	}
	ratio := func(workload, peer string, goal float64, what string) {
		d, ok1 := get(workload, "dlock")
		o, ok2 := get(workload, peer)
		if !ok1 || !ok2 || o.medianRate <= 0 {
			return
		}
		x := d.medianRate / o.medianRate
		t.add(what, fmt.Sprintf("%.3f× %s (%s vs %s cycles/s, medians)", x, peer, fmtRate(d.medianRate), fmtRate(o.medianRate)), yes(x >= goal))
	}
	ratio("serial", "raw", 0.95, "serial within 5% of the raw floor")
	ratio("uncontended", "redislock", 1.1, "uncontended ≥ 1.1× redislock")
	if d, ok := get("handoff", "dlock"); ok {
		p50 := percentile(d.handoff, 0.5)
		util := d.utilization()
		t.add("handoff p50 ≤ 150 µs", fmtDur(p50), yes(p50 > 0 && p50 <= 150*time.Microsecond))
		t.add("handoff utilization ≥ 0.85", fmt.Sprintf("%.2f", util), yes(util >= 0.85))
	}
	var best heldResult
	for n, r := range b.held["dlock"] {
		if n > best.n {
			best = r
		}
	}
	if best.n > 0 {
		load := best.use.clientCPU.Seconds() / best.window.Seconds()
		goal := fmt.Sprintf("%d leases renewed at ≤ 10%% of one core", best.n)
		t.add(goal, fmt.Sprintf("%.3f cores (TTL %v)", load, b.heldTTL), yes(load <= 0.10))
	}
	if len(t.rows) > 0 {
		t.write(w)
	}
}

// pingRTT times sequential PINGs: the floor of one loopback round trip.
func (b *bench) pingRTT() (p50, p99 time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := make([]time.Duration, 0, 2000)
	for range cap(d) {
		t0 := time.Now()
		if err := b.admin.Ping(ctx).Err(); err != nil {
			return 0, 0, err
		}
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	return percentile(d, 0.5), percentile(d, 0.99), nil
}

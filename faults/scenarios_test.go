package faults

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// scenario is one kind of fault, run against both locks.
type scenario struct {
	name   string
	fault  string // what the harness does, for the table
	ttl    time.Duration
	hold   time.Duration // the work inside the critical section
	pause  time.Duration // between a worker's iterations; default TTL/4
	faults [2]int        // how many to inject: short mode, full mode
	// mayOverlap: the theory allows two dlock holders to believe at once —
	// the holder was frozen and cannot know, or the store forgot the lock.
	mayOverlap bool
	// canaryFullOnly: the naive lock breaks here only with some luck, so its
	// failure is required in full mode only.
	canaryFullOnly bool
	setup          func(r *run)
	inject         func(r *run)
}

func (sc scenario) think() time.Duration {
	if sc.pause > 0 {
		return sc.pause
	}
	return sc.ttl / 4
}

func scenarios() []scenario {
	const ttl = 500 * time.Millisecond
	return []scenario{{
		name:  "pause",
		fault: "SIGSTOP a holder after its read, SIGCONT once a rival has written (longer than the TTL)",
		ttl:   ttl, hold: 150 * time.Millisecond, faults: [2]int{1, 4},
		mayOverlap: true, setup: plainStore, inject: injectPause,
	}, {
		name:  "kill",
		fault: "SIGKILL a holder right after it acquired; a new worker replaces it",
		ttl:   ttl, hold: 50 * time.Millisecond, faults: [2]int{3, 15},
		canaryFullOnly: true, setup: plainStore, inject: injectKill,
	}, {
		name:  "restart",
		fault: "SIGKILL Redis while a holder works, restart it empty on the same port",
		ttl:   ttl, hold: 300 * time.Millisecond, faults: [2]int{1, 4},
		mayOverlap: true, setup: plainStore, inject: injectRestart,
	}, {
		name:  "latency",
		fault: "120 ms added to every reply from Redis (work 400 ms, TTL 400 ms)",
		ttl:   400 * time.Millisecond, hold: 400 * time.Millisecond, faults: [2]int{1, 1},
		pause: 200 * time.Millisecond, // longer than the notification's 120 ms
		setup: latencySetup, inject: injectLatency,
	}, {
		name:  "blackhole",
		fault: "black-hole a holder's traffic to Redis after its read; heal once a rival has read (held bytes then arrive)",
		ttl:   ttl, hold: 200 * time.Millisecond, faults: [2]int{1, 4},
		setup: plainStore, inject: injectBlackhole,
	}, {
		name:  "failover",
		fault: "SIGKILL the master while a holder works; promote a replica lagging by TTL+100 ms",
		ttl:   ttl, hold: 300 * time.Millisecond, faults: [2]int{1, 3},
		mayOverlap: true, setup: replicatedStore, inject: injectFailover,
	}}
}

// plainStore is one redis-server, reached by each worker through its own
// switchable proxy.
func plainStore(r *run) { r.store = redisserver.Start(r.t) }

// injectPause freezes a holder in the middle of its critical section — after
// it read the counter and checked its lease — until a rival has taken the
// lock and written, then lets it go on to write.
func injectPause(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
		if !ok {
			return
		}
		r.signal(ev.W, syscall.SIGSTOP, evPause)
		r.fault(ev.W, "SIGSTOP")
		_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return e.K == evWrite && e.W != ev.W })
		r.signal(ev.W, syscall.SIGCONT, evResume)
		if !ok {
			r.t.Logf("pause: no rival wrote while %s was stopped", ev.W)
		}
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

// injectKill kills a holder the moment it reports its acquisition — for the
// naive lock that is between SETNX and EXPIRE — and starts a replacement
// that does the victim's remaining iterations.
func injectKill(r *run) {
	from := 0
	for n := 0; n < r.faults(); {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isAcq)
		if !ok {
			return
		}
		if !r.othersBusy(ev.W) {
			from = next // nobody would be waiting: recovery would time a process start
			continue
		}
		n++
		victim := r.procs[ev.W]
		r.signal(ev.W, syscall.SIGKILL, evKill)
		r.fault(ev.W, "SIGKILL")
		<-victim.done
		if left := r.iters[ev.W] - r.finished(ev.W) - 1; left > 0 {
			r.spawn(left)
		}
		_, from, _ = r.hub.waitFor(next, r.patience(), isAcq) // recovered: next kill
	}
}

// finished counts the iterations a worker has completed.
func (r *run) finished(worker string) int {
	n := 0
	for _, e := range r.hub.snapshot() {
		if e.K == evEnd && e.W == worker {
			n++
		}
	}
	return n
}

// othersBusy reports whether a worker other than w still has iterations to
// do, so that someone is there to take the lock over.
func (r *run) othersBusy(w string) bool {
	for name, p := range r.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		if name != w && r.finished(name) < r.iters[name] {
			return true
		}
	}
	return false
}

// injectRestart kills Redis while a holder works and restarts it empty.
func injectRestart(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
		if !ok {
			return
		}
		r.store.Kill()
		r.store.Restart()
		r.fault(ev.W, "redis restarted empty")
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

const replyLatency = 120 * time.Millisecond

// latencySetup puts a redisserver.Proxy that delays every reply in front of
// each worker.
func latencySetup(r *run) {
	r.store = redisserver.Start(r.t)
	r.dial = func(name string) string {
		p := redisserver.NewProxy(r.t, r.store.Addr())
		p.SetLatency(replyLatency)
		r.lagged[name] = p
		return p.Addr()
	}
}

// injectLatency only records the fault: the latency is on from the start.
// Replies 120 ms late stretch the naive lock's critical section past its TTL
// (SETNX and EXPIRE replies both wait), while dlock renews in time.
func injectLatency(r *run) { r.fault("", fmt.Sprintf("latency %v", replyLatency)) }

// injectBlackhole partitions a holder from Redis after its read, and heals
// the partition once a rival has taken the lock and read: everything the
// holder sent meanwhile (its release, for one) arrives then.
func injectBlackhole(r *run) {
	from := 0
	for range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
		if !ok {
			return
		}
		px := r.proxies[ev.W]
		px.Partition(true)
		r.fault(ev.W, "partitioned")
		_, next, ok = r.hub.waitFor(next, r.patience(), func(e event) bool { return isRead(e) && e.W != ev.W })
		px.Partition(false)
		if !ok {
			r.t.Logf("blackhole: no rival read while %s was cut off", ev.W)
		}
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

// replicaLag is how far the replica trails the master: more than a TTL, so
// every lock the replica knows of has expired when it is promoted.
func replicaLag(r *run) time.Duration { return r.sc.ttl + 100*time.Millisecond }

// replicatedStore starts a master and a replica that lags behind it.
func replicatedStore(r *run) {
	r.store = redisserver.Start(r.t)
	r.replica, r.link = r.startReplica(r.store, replicaLag(r))
}

// injectFailover kills the master while a holder works, promotes the
// replica, and moves the workers to it; with faults left, it starts the next
// replica.
func injectFailover(r *run) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := 0
	for i := range r.faults() {
		ev, next, ok := r.hub.waitFor(from, r.patience(), isRead)
		if !ok {
			return
		}
		r.failover(ctx)
		r.fault(ev.W, "failover")
		if i+1 < r.faults() {
			r.replica, r.link = r.startReplica(r.store, replicaLag(r))
		}
		_, from, _ = r.hub.waitFor(next, r.patience(), endOf(ev.A))
	}
}

package etcddriver

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// faultTTL is the lock TTL of the fault tests: above etcd's 2 s minimum
// lease, and long enough that a leader election (about a second with the
// default 1 s election timeout) does not by itself end every lease.
const faultTTL = 3 * time.Second

// takeoverSlack is the stated bound on how much later than the TTL a
// dead holder's lock is taken over: etcd's leader looks for expired leases
// every 500 ms, revokes them through Raft, and the watch then wakes the
// waiter, which acquires in one more round trip.
const takeoverSlack = time.Second

// fifoTakeoverSlack is takeoverSlack for a fair (WithFIFO) lock: after
// etcd's deletion of the dead holder's key, the waiters' expiry watch
// waits handoffGrace for a hand-off, then steps the queue.
const fifoTakeoverSlack = takeoverSlack + handoffGrace + 400*time.Millisecond

// lockModes are the two ways the fault scenarios take the lock: plain
// Lock (etcd's default) and the fair queue.
var lockModes = []struct {
	name string
	fifo bool
}{{"plain", false}, {"fifo", true}}

// faultRun is one scenario in progress.
type faultRun struct {
	t       *testing.T
	h       *hub
	fc      *fencedCounter
	base    workerConfig
	workers []*proc
	// endpoints gives worker i its endpoints string.
	endpoints func(i int) string
	takeover  []time.Duration // after a holder died: checked against TTL + slack
	slack     time.Duration
	recovery  []time.Duration // after a member died: reported
	faults    int
}

func (r *faultRun) start(i int) *proc {
	cfg := r.base
	cfg.Name = fmt.Sprintf("w%d", i)
	cfg.Endpoints = r.endpoints(i)
	p := startWorker(r.t, r.h, cfg)
	r.workers = append(r.workers, p)
	return p
}

func (r *faultRun) worker(name string) *proc {
	for _, p := range r.workers {
		if p.name == name {
			return p
		}
	}
	r.t.Fatalf("no worker %q", name)
	return nil
}

func newFaultRun(t *testing.T, key string, fifo bool, hold time.Duration, endpoints func(int) string) *faultRun {
	if testing.Short() {
		t.Skip("fault scenarios run real processes for tens of seconds")
	}
	fc := newFencedCounter(t)
	slack := takeoverSlack
	if fifo {
		key, slack = key+"-fifo", fifoTakeoverSlack
	}
	return &faultRun{
		t: t, h: newHub(), fc: fc, endpoints: endpoints, slack: slack,
		base: workerConfig{Key: key, FIFO: fifo, TTL: faultTTL, Hold: hold, Gap: 50 * time.Millisecond,
			Think: 100 * time.Millisecond, Resource: fc.addr},
	}
}

// run starts n workers, waits for a first completed write, injects faults,
// lets the workers go on for a while, stops them and checks the history.
func (r *faultRun) run(n int, inject func(r *faultRun, from int) int) {
	t := r.t
	for i := range n {
		r.start(i)
	}
	_, from, ok := r.h.waitFor(0, 20*time.Second, func(e event) bool { return e.Ev == "done" && e.Accepted })
	if !ok {
		t.Fatalf("no worker completed a write within 20s: %v", r.h.snapshot())
	}
	for range r.faults {
		from = inject(r, from)
	}
	// Progress after the last fault: another write accepted.
	if _, _, ok := r.h.waitFor(from, 4*faultTTL, func(e event) bool { return e.Ev == "done" && e.Accepted }); !ok {
		t.Errorf("no write accepted within %v after the last fault", 4*faultTTL)
	}
	for _, p := range r.workers {
		p.kill()
	}
	r.check()
}

// belief is what one acquisition believed: held from Acq to End.
type belief struct {
	w        string
	tok      uint64
	acq, end int64
}

// history is what the checker found in a scenario's events.
type history struct {
	acquisitions  int
	stale         int // writes accepted after their writer's lease had ended
	rejected      int // writes the resource refused (fencing)
	overlaps      int // acquisitions that began before an earlier holder's belief ended
	maxOverlap    time.Duration
	inversions    int // tokens not above every earlier acquisition's
	errs          int // Lock calls that failed
	overlapDetail []string
}

// analyze checks the events of a run: every acquisition's belief interval
// against every earlier one, tokens in acquisition order, and writes
// against their writer's belief.
func analyze(events []event) history {
	var h history
	var beliefs []belief
	for _, e := range events {
		switch e.Ev {
		case "done", "lost":
			beliefs = append(beliefs, belief{e.W, e.Tok, e.Acq, e.End})
			if e.Wrote && e.Accepted && e.WriteT > e.End {
				h.stale++
			}
			if e.Wrote && !e.Accepted {
				h.rejected++
			}
		case "error":
			h.errs++
		}
	}
	slices.SortFunc(beliefs, func(a, b belief) int { return cmp.Compare(a.acq, b.acq) })
	h.acquisitions = len(beliefs)
	var maxEnd int64
	var maxTok uint64
	for i, b := range beliefs {
		if i > 0 && b.acq < maxEnd {
			h.overlaps++
			d := time.Duration(maxEnd - b.acq)
			h.maxOverlap = max(h.maxOverlap, d)
			h.overlapDetail = append(h.overlapDetail, fmt.Sprintf("%s (token %d) acquired %v before an earlier holder's belief ended", b.w, b.tok, d))
		}
		if i > 0 && b.tok <= maxTok {
			h.inversions++
		}
		maxEnd, maxTok = max(maxEnd, b.end), max(maxTok, b.tok)
	}
	return h
}

func (r *faultRun) check() {
	t := r.t
	h := analyze(r.h.snapshot())
	for _, d := range h.overlapDetail {
		t.Errorf("overlap: %s", d)
	}
	if h.inversions > 0 {
		t.Errorf("%d token inversions", h.inversions)
	}
	if h.stale > 0 {
		t.Errorf("%d stale writes accepted", h.stale)
	}
	value, accepted, _, lost := r.fc.stats()
	if lost > 0 || value != int64(accepted) {
		t.Errorf("counter %d after %d accepted writes, %d lost updates", value, accepted, lost)
	}
	for _, d := range r.takeover {
		if d > faultTTL+r.slack {
			t.Errorf("takeover after %v, want within TTL %v + %v", d, faultTTL, r.slack)
		}
	}
	summary := fmt.Sprintf("%s: %d faults, %d acquisitions, %d writes accepted, %d stale writes accepted, %d rejected by fencing, overlaps %d, token inversions %d, lock errors %d, takeover %v, recovery %v",
		t.Name(), r.faults, h.acquisitions, accepted, h.stale, h.rejected, h.overlaps, h.inversions, h.errs,
		roundAll(r.takeover), roundAll(r.recovery))
	t.Log(summary)
	if path := os.Getenv("DLOCK_ETCD_FAULTS_LOG"); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, summary)
			f.Close()
		}
	}
}

// faultCount is how many faults a scenario injects: short by default,
// more with DLOCK_FAULTS_FULL=1.
func faultCount(short, full int) int {
	if os.Getenv("DLOCK_FAULTS_FULL") == "1" {
		return full
	}
	return short
}

func roundAll(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(10 * time.Millisecond).String()
	}
	return "[" + strings.Join(s, " ") + "]"
}

func isEv(ev string) func(event) bool { return func(e event) bool { return e.Ev == ev } }

// A holder frozen (SIGSTOP) between its lease check and its write, for
// longer than the TTL: a rival takes over within TTL + slack, and the
// frozen holder's write, sent when it wakes, is rejected by fencing.
func TestFaultPause(t *testing.T) {
	for _, mode := range lockModes {
		t.Run(mode.name, func(t *testing.T) {
			m := etcdserver.Start(t)
			r := newFaultRun(t, "pause", mode.fifo, 200*time.Millisecond, func(int) string { return m.Addr() })
			r.base.Gap = 300 * time.Millisecond // the window the test freezes the holder in
			r.faults = faultCount(3, 10)
			r.run(3, func(r *faultRun, from int) int {
				e, from, ok := r.h.waitFor(from, 10*time.Second, isEv("checked"))
				if !ok {
					r.t.Fatal("no holder reached its write")
				}
				p := r.worker(e.W)
				p.signal(syscall.SIGSTOP)
				paused := time.Now()
				rival, from, ok := r.h.waitFor(from, 3*faultTTL, func(x event) bool { return x.Ev == "acquired" && x.W != e.W })
				if !ok {
					r.t.Fatalf("no rival acquired within %v of freezing %s", 3*faultTTL, e.W)
				}
				r.takeover = append(r.takeover, time.Unix(0, rival.T).Sub(paused))
				_, from, _ = r.h.waitFor(from, 2*faultTTL, func(x event) bool { return x.Ev == "done" && x.W != e.W })
				p.signal(syscall.SIGCONT)
				// The frozen holder's write comes back refused.
				w, from, ok := r.h.waitFor(from, 2*faultTTL, func(x event) bool { return x.Ev == "done" && x.W == e.W })
				if !ok {
					r.t.Fatalf("%s did not finish its write after SIGCONT", e.W)
				}
				if w.Accepted {
					r.t.Errorf("%s's write after a pause past its lease was accepted (token %d)", e.W, w.Tok)
				}
				return from
			})
		})
	}
}

// A holder killed (SIGKILL) right after it acquired: a rival takes over
// within TTL + slack. A fresh worker replaces each one killed.
func TestFaultKill(t *testing.T) {
	for _, mode := range lockModes {
		t.Run(mode.name, func(t *testing.T) {
			m := etcdserver.Start(t)
			r := newFaultRun(t, "kill", mode.fifo, 200*time.Millisecond, func(int) string { return m.Addr() })
			r.faults = faultCount(3, 10)
			next := 3
			r.run(3, func(r *faultRun, from int) int {
				e, from, ok := r.h.waitFor(from, 10*time.Second, isEv("acquired"))
				if !ok {
					r.t.Fatal("no acquisition")
				}
				r.worker(e.W).kill()
				killed := time.Now()
				r.start(next)
				next++
				rival, from, ok := r.h.waitFor(from, 3*faultTTL, func(x event) bool { return x.Ev == "acquired" && x.W != e.W })
				if !ok {
					r.t.Fatalf("no takeover within %v of killing %s", 3*faultTTL, e.W)
				}
				r.takeover = append(r.takeover, time.Unix(0, rival.T).Sub(killed))
				return from
			})
		})
	}
}

// A holder's connection to etcd black-holed (a partition: packets dropped,
// connections left open) while it works longer than the TTL: it sees its
// lease lost at its deadline and does not write; a rival takes over within
// TTL + slack of the partition; after healing, the holder works again.
func TestFaultPartition(t *testing.T) {
	for _, mode := range lockModes {
		t.Run(mode.name, func(t *testing.T) {
			m := etcdserver.Start(t)
			var proxies []*redisserver.Proxy
			r := newFaultRun(t, "partition", mode.fifo, faultTTL+time.Second, func(int) string {
				p := redisserver.NewProxy(t, m.Addr())
				proxies = append(proxies, p)
				return p.Addr()
			})
			r.faults = faultCount(2, 6)
			r.run(2, func(r *faultRun, from int) int {
				e, from, ok := r.h.waitFor(from, 3*(faultTTL+time.Second), isEv("acquired"))
				if !ok {
					r.t.Fatal("no acquisition")
				}
				i := slices.IndexFunc(r.workers, func(p *proc) bool { return p.name == e.W })
				proxies[i].Blackhole(true)
				cut := time.Now()
				atCut := from
				lost, from, ok := r.h.waitFor(from, 3*faultTTL, func(x event) bool { return x.W == e.W && x.Ev != "acquired" })
				if !ok || lost.Ev != "lost" {
					r.t.Errorf("partitioned holder %s: %+v, want it to see its lease lost", e.W, lost)
				}
				// The rival may take over before the holder reports its loss.
				rival, _, ok := r.h.waitFor(atCut, 3*faultTTL, func(x event) bool { return x.Ev == "acquired" && x.W != e.W })
				if !ok {
					r.t.Fatalf("no takeover within %v of partitioning %s", 3*faultTTL, e.W)
				}
				r.takeover = append(r.takeover, time.Unix(0, rival.T).Sub(cut))
				proxies[i].Blackhole(false)
				proxies[i].CloseAll()
				return from
			})
		})
	}
}

// A follower, then the leader, of a three-member cluster killed with
// SIGKILL while a holder works, and restarted with its data a little
// later: no overlap, no stale write, and writes go on.
func TestFaultMemberKill(t *testing.T) {
	for _, leader := range []bool{false, true} {
		name := map[bool]string{false: "follower", true: "leader"}[leader]
		t.Run(name, func(t *testing.T) {
			c := etcdserver.StartCluster(t, 3)
			eps := strings.Join(c.Endpoints(), ",")
			r := newFaultRun(t, "member-"+name, false, 500*time.Millisecond, func(int) string { return eps })
			r.faults = faultCount(2, 6)
			r.run(3, func(r *faultRun, from int) int {
				_, from, ok := r.h.waitFor(from, 10*time.Second, isEv("acquired"))
				if !ok {
					r.t.Fatal("no acquisition")
				}
				li, ok := c.Leader(10 * time.Second)
				if !ok {
					r.t.Fatal("no leader")
				}
				victim := c.Members[li]
				if !leader {
					victim = c.Members[(li+1)%len(c.Members)]
				}
				victim.Kill()
				killed := time.Now()
				w, from, ok := r.h.waitFor(from, 4*faultTTL, func(x event) bool {
					return x.Ev == "done" && x.Accepted && x.Acq > killed.UnixNano()
				})
				if !ok {
					r.t.Fatalf("no write by a holder that acquired after the kill, within %v", 4*faultTTL)
				}
				r.recovery = append(r.recovery, time.Unix(0, w.Acq).Sub(killed))
				victim.Restart()
				return from
			})
		})
	}
}

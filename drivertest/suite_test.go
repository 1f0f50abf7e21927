package drivertest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/drivertest"
	"github.com/dlockio/dlock/memdriver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mutantEnv names the mutant a child process runs the suite on.
const mutantEnv = "DRIVERTEST_MUTANT"

// TestUnmutated checks the harness below: on plain memdriver (no mutant)
// the whole suite passes, so the failures of TestMutants are the mutants'.
func TestUnmutated(t *testing.T) {
	drivertest.Run(t, harness(mutant{make: func(*mutated) {}}))
}

// TestMutants runs the suite's subtests on each mutant in a child process
// (a failing subtest cannot be contained in this one) and checks that they
// fail.
func TestMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for _, m := range mutants {
		for _, sub := range m.subtests {
			t.Run(m.name+"/"+sub, func(t *testing.T) {
				t.Parallel()
				group, name, _ := strings.Cut(sub, "/")
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.count=1",
					"-test.run=^TestMutantChild$/^"+group+"$/^"+name+"$")
				cmd.Env = append(os.Environ(), mutantEnv+"="+m.name)
				out, err := cmd.CombinedOutput()
				if err == nil {
					t.Fatalf("%s passed on a driver with %s\n%s", sub, m.name, out)
				}
				if want := "--- FAIL: TestMutantChild/" + sub + " "; !bytes.Contains(out, []byte(want)) {
					t.Fatalf("%s did not fail on a driver with %s (child: %v)\n%s", sub, m.name, err, out)
				}
			})
		}
	}
}

// TestMutantChild is the child side of TestMutants.
func TestMutantChild(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("run by TestMutants in a child process")
	}
	for _, m := range mutants {
		if m.name == name {
			drivertest.Run(t, harness(m))
			return
		}
	}
	t.Fatalf("no mutant %q", name)
}

// harness gives each subtest a memdriver store, and hands out mutated
// handles on it.
func harness(m mutant) drivertest.Harness {
	type store struct {
		d       *memdriver.Driver
		handles []*mutated
		snap    *memdriver.Snapshot
		snapTok uint64
	}
	var mu sync.Mutex
	stores := map[*testing.T]*store{}
	get := func(t *testing.T) *store {
		mu.Lock()
		defer mu.Unlock()
		s := stores[t]
		if s == nil {
			t.Fatal("harness: Restart or Snapshot before New")
		}
		return s
	}
	// probe issues a token on the store: one above the last one issued.
	probe := func(t *testing.T, d *memdriver.Driver) uint64 {
		ctx := context.Background()
		res, err := d.Acquire(ctx, driver.AcquireRequest{Key: "\x00probe", ID: "probe", TTL: time.Second})
		if err != nil || !res.Acquired {
			t.Fatalf("harness probe: %+v, %v", res, err)
		}
		if _, err := d.Release(ctx, []driver.ReleaseRequest{{Key: "\x00probe", ID: "probe"}}); err != nil {
			t.Fatal(err)
		}
		return res.Token
	}
	return drivertest.Harness{
		// memdriver delivers within microseconds; a short timeout keeps
		// the mutants that never deliver from costing seconds.
		Timeout: 500 * time.Millisecond,
		BadKeys: m.badKeys,
		New: func(t *testing.T) driver.Driver {
			mu.Lock()
			defer mu.Unlock()
			s := stores[t]
			if s == nil {
				s = &store{d: memdriver.New()}
				stores[t] = s
				t.Cleanup(func() { mu.Lock(); delete(stores, t); mu.Unlock() })
			}
			h := &mutated{Driver: s.d.Connect()}
			m.make(h)
			s.handles = append(s.handles, h)
			if m.keyChecker {
				return keyChecked{h}
			}
			return h
		},
		Snapshot: func(t *testing.T) {
			s := get(t)
			s.snap = s.d.Snapshot()
			if m.counterLost {
				s.snapTok = probe(t, s.d)
			}
		},
		Restart: func(t *testing.T, how drivertest.Restart) {
			s := get(t)
			from := (*memdriver.Snapshot)(nil)
			base := uint64(0) // the counter as the restarted store has it
			if how == drivertest.RestartFromSnapshot {
				from, base = s.snap, s.snapTok
			}
			if m.counterLost {
				offset := probe(t, s.d) - base
				for _, h := range s.handles {
					h.tokenOffset.Store(offset)
				}
			}
			s.d.Restart(from)
		},
	}
}

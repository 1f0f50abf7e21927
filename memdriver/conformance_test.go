package memdriver_test

import (
	"sync"
	"testing"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/drivertest"
	"github.com/dlockio/dlock/memdriver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stores remembers each subtest's store so that the harness can restart
// it: Restart and Snapshot are given the subtest, not the driver.
type stores struct {
	mu    sync.Mutex
	byT   map[*testing.T]*memdriver.Driver
	snaps map[*testing.T]*memdriver.Snapshot
}

func (s *stores) get(t *testing.T) *memdriver.Driver {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.byT[t]
	if d == nil {
		t.Fatal("harness: Restart or Snapshot before New")
	}
	return d
}

func harness() drivertest.Harness {
	s := &stores{byT: map[*testing.T]*memdriver.Driver{}, snaps: map[*testing.T]*memdriver.Snapshot{}}
	return drivertest.Harness{
		New: func(t *testing.T) driver.Driver {
			s.mu.Lock()
			defer s.mu.Unlock()
			d := s.byT[t]
			if d == nil {
				d = memdriver.New()
				s.byT[t] = d
				t.Cleanup(func() {
					s.mu.Lock()
					delete(s.byT, t)
					delete(s.snaps, t)
					s.mu.Unlock()
				})
			}
			// A second New in one subtest is a second client of its store.
			return d.Connect()
		},
		Restart: func(t *testing.T, how drivertest.Restart) {
			d := s.get(t)
			var from *memdriver.Snapshot
			if how == drivertest.RestartFromSnapshot {
				s.mu.Lock()
				from = s.snaps[t]
				s.mu.Unlock()
				if from == nil {
					t.Fatal("harness: RestartFromSnapshot without a Snapshot")
				}
			}
			d.Restart(from)
		},
		Snapshot: func(t *testing.T) {
			d := s.get(t)
			snap := d.Snapshot()
			s.mu.Lock()
			s.snaps[t] = snap
			s.mu.Unlock()
		},
	}
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, harness())
}

package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/memdriver"
)

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("nil driver: %v, want driver.ErrInvalid", err)
	}
	bad := memdriver.New(memdriver.WithCapabilities(driver.Capabilities{TTLUnit: time.Millisecond, MinTTL: time.Millisecond}))
	if _, err := New(Config{Driver: bad}); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("MaxBatch 0: %v, want driver.ErrInvalid", err)
	}
}

// The shortest TTL leaves at least half of it valid after the drift margin.
func TestMinTTLLeavesHalfValid(t *testing.T) {
	for _, caps := range []driver.Capabilities{
		memdriver.DefaultCapabilities(),
		{TTLUnit: time.Millisecond, MinTTL: 20 * time.Millisecond, ExpiryMargin: 2 * time.Millisecond, MaxBatch: 1},
		{TTLUnit: time.Second, MinTTL: time.Second, MaxBatch: 1},
	} {
		e := newTestEngine(t, memdriver.New(memdriver.WithCapabilities(caps)))
		m := MinTTL(e.caps)
		if m < caps.MinTTL || m%caps.TTLUnit != 0 || e.validity(m) < m/2 || e.validity(m-caps.TTLUnit) >= (m-caps.TTLUnit)/2 && m > caps.MinTTL {
			t.Errorf("caps %+v: MinTTL %v (validity %v)", caps, m, e.validity(m))
		}
	}
}

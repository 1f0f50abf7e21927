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

package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockio/dlock/driver"
)

// Every declared kind passes Check; any other value fails it with an error
// matching ErrInvalid that names the value.
func TestKindCheck(t *testing.T) {
	for _, k := range []driver.Kind{driver.KindLock, driver.KindWaiter, driver.KindRead, driver.KindPermit} {
		if err := k.Check(); err != nil {
			t.Errorf("%v.Check() = %v, want nil", k, err)
		}
	}
	for _, k := range []driver.Kind{driver.KindPermit + 1, 255} {
		err := k.Check()
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("%v.Check() = %v, want an error matching ErrInvalid", k, err)
			continue
		}
		if !strings.Contains(err.Error(), k.String()) {
			t.Errorf("%v.Check() = %q, want the kind named", k, err)
		}
	}
}

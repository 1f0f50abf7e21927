package once_test

import (
	"testing"

	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/oncetest"
)

func TestMemStoreConformance(t *testing.T) {
	oncetest.Run(t, oncetest.Harness{
		New: func(t *testing.T) once.Store { return once.NewMemStore() },
	})
}

package sqlfence_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain turns the test binary into a fault-test worker when the harness
// re-executed it as one (workerEnv set); otherwise it runs the tests and
// fails the package if a goroutine outlives them.
func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(workerMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

package faults

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// workerEnv carries a worker's JSON configuration. Its presence turns the test
// binary into a worker process instead of running tests.
const workerEnv = "DLOCK_FAULTS_WORKER"

// TestMain runs a worker when the harness re-executed this binary as one, and
// otherwise runs the tests and fails the package if a goroutine outlives them.
func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(workerEnv); ok {
		os.Exit(workerMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

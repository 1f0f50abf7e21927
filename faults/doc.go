// Package faults is dlock's fault-injection suite. It holds tests only: worker
// processes lock, read-modify-write a fenced counter and unlock, while the
// harness pauses and kills them, kills and restarts Redis, delays or black-holes
// their traffic, and fails Redis over to a lagging replica. Every scenario runs
// twice, once on dlock and once on a deliberately naive lock (the canary), and a
// checker counts stale writes, overlapping lock holders, lost increments,
// recovery times after a crash and leaked keys.
//
// Workers are the test binary itself, re-executed with DLOCK_FAULTS_WORKER set,
// so that they can be stopped with SIGSTOP and killed with SIGKILL like any real
// process. They report what they do as JSON lines on stdout.
//
// By default the suite runs a short mode sized for CI. DLOCK_FAULTS_FULL=1 runs
// more workers, iterations and faults; DLOCK_FAULTS_TABLE=FILE also writes the
// summary table (as in docs/reliability.md) to FILE:
//
//	DLOCK_FAULTS_FULL=1 DLOCK_FAULTS_TABLE=faults-table.md go test -race -count=1 -run TestFaults -v ./faults/
//
// The suite needs redis-server on PATH and servers it owns: it is skipped under
// -short and when DLOCK_TEST_REDIS points the other tests at a shared server.
package faults

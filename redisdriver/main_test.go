package redisdriver_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// test closes its Drivers, Clients and go-redis connections in Cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

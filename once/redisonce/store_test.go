package redisonce_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/dlockio/dlock/once"
	"github.com/dlockio/dlock/once/oncetest"
	"github.com/dlockio/dlock/once/redisonce"
)

// The suite against a real redis-server with appendfsync always, so that
// acknowledged records survive the restart (kill -9) the suite makes.
func TestConformance(t *testing.T) {
	srv := redisserver.Start(t, redisserver.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	var n atomic.Int64
	oncetest.Run(t, oncetest.Harness{
		New: func(t *testing.T) once.Store {
			s, err := redisonce.New(srv.Client(t), redisonce.WithPrefix(fmt.Sprintf("ct%d:", n.Add(1))))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Restart: func(t *testing.T) {
			srv.Kill()
			srv.Restart()
		},
	})
}

package cli

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dlockio/dlock"
)

// metricsPath is where --metrics-addr serves the exporter's handler.
const metricsPath = "/metrics"

// startMetrics makes the binary's metrics exporter, listens on addr and
// serves it there. The Client must be opened with the returned observer
// installed; stop closes the listener and every connection, and returns
// when the server has. The listener is opened before the lock is
// requested, so a port that cannot be had is a usage error (64) and
// nothing was locked.
func (s *invocation) startMetrics(addr string) (obs dlock.Observer, stop func(), err error) {
	handler, obs, err := s.opts.Metrics()
	if err != nil {
		return nil, nil, fmt.Errorf("metrics exporter: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, usageErrorf("--metrics-addr %q: %v (see dlock run --help)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(metricsPath, handler)
	// A scraper that never sends its request must not hold a connection
	// for the whole run.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l) // ends with ErrServerClosed on stop
	}()
	return obs, func() {
		_ = srv.Close()
		<-done
	}, nil
}

package redisserver

import (
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dlockio/dlock/internal/testkit/serverproc"
)

// launch starts redis-server on s.port and waits until it is ready.
func (s *Server) launch() (*serverproc.Process, error) {
	args := []string{"--port", strconv.Itoa(s.port)}
	var probeTLS *tls.Config
	if s.tls != nil {
		args = s.tls.serverArgs(s.port)
		probeTLS = s.tls.ClientConfig(s.t)
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
	)
	args = append(args, s.args...)
	if s.conf != "" {
		args = append([]string{s.conf}, args...)
	}

	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "--- redisserver: %s %s\n", s.bin, quoteArgs(args))
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.Stdout = logf // an *os.File is inherited directly: no copy goroutines
	cmd.Stderr = logf
	p, err := serverproc.Start(cmd)
	logf.Close() // the child holds its own descriptor
	if err != nil {
		return nil, err
	}
	if err := waitReady(s.addr, probeTLS, p, startTimeout); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// waitReady polls addr with PING (over TLS when tc is set) until the
// server owned by p answers, p exits or timeout passes. It checks the
// answering server's process_id so a different server that grabbed the
// port is not mistaken for ours.
func waitReady(addr string, tc *tls.Config, p *serverproc.Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pid := strconv.Itoa(p.Pid())
	backoff := 2 * time.Millisecond
	exited := func() error {
		return fmt.Errorf("redis-server exited before becoming ready (%v); see log", p.State())
	}
	for {
		select {
		case <-p.Done():
			return exited()
		default:
		}
		err := probe(addr, tc, pid)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready after %v: %w", addr, timeout, err)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-p.Done():
			timer.Stop()
			return exited()
		case <-timer.C:
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

func probe(addr string, tc *tls.Config, pid string) error {
	const timeout = 500 * time.Millisecond
	pong, err := commandTLS(addr, tc, timeout, "PING")
	if err != nil {
		return err
	}
	if pong != "PONG" {
		return fmt.Errorf("PING answered %q", pong)
	}
	info, err := commandTLS(addr, tc, timeout, "INFO", "server")
	if err != nil {
		return err
	}
	if got := infoField(info, "process_id"); got != pid {
		return fmt.Errorf("port answered by process %q, want %s", got, pid)
	}
	return nil
}

// quoteArgs renders args for the log, quoting empty or spaced ones.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t\"") {
			q[i] = strconv.Quote(a)
		}
	}
	return strings.Join(q, " ")
}

package redisserver

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/serverproc"
	"github.com/redis/go-redis/v9"
)

const (
	// EnvAddr names the environment variable that points Start at an
	// existing Redis server (host:port) instead of starting one.
	EnvAddr = "DLOCK_TEST_REDIS"

	startTimeout  = 10 * time.Second
	stopTimeout   = 10 * time.Second
	startAttempts = 5
	logTailLines  = 30
)

// Option configures a Server started by Start.
type Option func(*config)

type config struct {
	args []string
	conf string
	tls  *TLSFiles
}

// WithConfigFile writes contents to a redis.conf in the server's directory
// and starts redis-server with it (needed for Sentinel, which rewrites its
// configuration file).
func WithConfigFile(contents string) Option {
	return func(c *config) { c.conf = contents }
}

// WithArgs appends extra command-line arguments for redis-server, for example
// WithArgs("--appendonly", "yes"). They follow the defaults and therefore
// override them. They are reused by Restart.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Server is a Redis server used by one test: normally a redis-server process
// owned by the test, or an external server when DLOCK_TEST_REDIS is set.
// Its methods are safe for concurrent use, but Kill, Stop and Restart may end
// the test (Skip/Fatal) and so belong on the test's goroutine.
type Server struct {
	t        testing.TB
	addr     string
	port     int
	external bool

	bin     string
	dir     string
	logPath string
	args    []string
	conf    string    // config file path, first argument when set
	tls     *TLSFiles // TLS only (WithTLS), or nil

	mu   sync.Mutex
	proc *serverproc.Process // nil when no process is running
}

// Start starts redis-server on a free loopback port with a fresh data
// directory, waits until it answers PING and registers a cleanup that kills
// it. When DLOCK_TEST_REDIS is set, Start instead flushes and returns that
// server. Start fails the test if the server cannot be started.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if addr := os.Getenv(EnvAddr); addr != "" {
		if cfg.tls != nil {
			t.Skip("redisserver: a TLS server needs a server started by the test (" + EnvAddr + " is set)")
		}
		return useExternal(t, addr)
	}

	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redisserver: redis-server not found (set %s to use an existing server): %v", EnvAddr, err)
	}
	dir := t.TempDir()
	s := &Server{
		t:       t,
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		args:    cfg.args,
		tls:     cfg.tls,
	}
	if cfg.conf != "" {
		s.conf = filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(cfg.conf), 0o644); err != nil {
			t.Fatalf("redisserver: writing config: %v", err)
		}
	}
	t.Cleanup(s.cleanup)

	var lastErr error
	for range startAttempts {
		port, err := serverproc.FreePort()
		if err != nil {
			t.Fatalf("redisserver: finding a free port: %v", err)
		}
		s.port = port
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := s.launch()
		if err == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return s
		}
		lastErr = err // most likely the port was taken meanwhile
	}
	t.Fatalf("redisserver: starting redis-server: %v", lastErr)
	return nil
}

func useExternal(t testing.TB, addr string) *Server {
	t.Helper()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redisserver: %s=%q: %v", EnvAddr, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("redisserver: %s=%q: bad port: %v", EnvAddr, addr, err)
	}
	if _, err := command(addr, startTimeout, "FLUSHALL"); err != nil {
		t.Fatalf("redisserver: FLUSHALL on %s: %v", addr, err)
	}
	return &Server{t: t, addr: net.JoinHostPort(host, portStr), port: port, external: true}
}

// Addr returns the server address as host:port.
func (s *Server) Addr() string { return s.addr }

// Port returns the server's TCP port. It stays the same across Restart.
func (s *Server) Port() int { return s.port }

// Client returns a new go-redis client for the server, closed when t ends.
// See NewClient for the options used; a TLS server (WithTLS) is reached
// with the client certificate.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	if s.tls != nil {
		c := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: true, TLSConfig: s.tls.ClientConfig(t)})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return NewClient(t, s.addr)
}

// NewClient returns a new go-redis client for addr (a Server or a Proxy
// address), closed when t ends. ContextTimeoutEnabled is set, so context
// deadlines bound network reads and writes.
func NewClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the server process and waits for it to exit. It is
// a no-op if the process is not running. With an external server it skips
// the test.
func (s *Server) Kill() {
	s.t.Helper()
	s.requireOwned()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Stop sends SIGTERM to the server process (letting it persist data if
// persistence was enabled with WithArgs) and waits for it to exit, killing
// it after 10s. It is a no-op if the process is not running. With an
// external server it skips the test.
func (s *Server) Stop() {
	s.t.Helper()
	s.requireOwned()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Stop(syscall.SIGTERM, stopTimeout)
		s.proc = nil
	}
}

// Restart kills the server process if it is still running and starts a new
// one on the same port and data directory, waiting until it answers PING.
// Without persistence the new server starts empty. A port that is briefly
// unavailable is retried a few times. With an external server it skips the
// test.
func (s *Server) Restart() {
	s.t.Helper()
	s.requireOwned()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(startTimeout)
	for attempt := 1; ; attempt++ {
		p, err := s.launch()
		if err == nil {
			s.proc = p
			return
		}
		if attempt >= startAttempts || time.Now().After(deadline) {
			s.t.Fatalf("redisserver: restarting redis-server on port %d: %v", s.port, err)
		}
		time.Sleep(backoff) // retry backoff, not synchronisation
		backoff *= 2
	}
}

// Dir returns the server's data directory, where SAVE writes dump.rdb and
// from which Restart loads it. It is empty for an external server.
func (s *Server) Dir() string { return s.dir }

// RestartEmpty is Restart after deleting the persisted data (the RDB
// snapshot and any append-only files), so the new server starts empty
// even if the test saved or enabled persistence.
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.requireOwned()
	s.Kill()
	for _, name := range []string{"dump.rdb", "appendonly.aof", "appendonlydir"} {
		if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			s.t.Fatalf("redisserver: removing %s: %v", name, err)
		}
	}
	s.Restart()
}

func (s *Server) requireOwned() {
	s.t.Helper()
	if s.external {
		s.t.Skip("redisserver: needs a server started by the test (" + EnvAddr + " is set)")
	}
}

// cleanup kills the process (if any) and, if the test failed, logs the tail
// of the server log.
func (s *Server) cleanup() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
	if s.t.Failed() {
		s.t.Logf("redisserver: last lines of %s:\n%s", s.logPath, serverproc.LogTail(s.logPath, logTailLines))
	}
}

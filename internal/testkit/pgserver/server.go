package pgserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock/internal/testkit/serverproc"
)

const (
	startTimeout  = 30 * time.Second
	stopTimeout   = 10 * time.Second
	startAttempts = 5
	logTailLines  = 40
	// User is the database superuser initdb creates; it logs in without a
	// password (trust authentication, loopback and socket only).
	User = "postgres"
)

// Server is a PostgreSQL server owned by one test. Its methods may end the
// test (Fatal) and so belong on the test's goroutine, except DSN, Port and
// Open.
type Server struct {
	t        testing.TB
	dir      string // the temporary directory: data/, the socket, the log
	dataDir  string
	logPath  string
	port     int
	postgres string
	cred     *syscall.Credential // nil unless run as the postgres user

	mu   sync.Mutex
	proc *serverproc.Process // nil while stopped
}

// Start runs initdb into a fresh temporary directory, starts postgres on a
// free loopback port, waits until it accepts queries and registers a
// cleanup that stops it and removes the directory. It fails the test when
// PostgreSQL is not installed or does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	initdb, postgres, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	cred, err := account()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is private to us, and the server may run as
	// another user.
	dir, err := os.MkdirTemp("", "pgserver-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, dir: dir, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log"),
		postgres: postgres, cred: cred}
	t.Cleanup(func() {
		s.stop(syscall.SIGINT) // a fast shutdown leaves no shared memory behind
		_ = os.RemoveAll(dir)
	})
	if err := chownTree(dir, cred); err != nil {
		t.Fatal(err)
	}
	out, err := s.command(initdb, "-D", s.dataDir, "-U", User, "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		t.Fatalf("pgserver: initdb: %v\n%s", err, out)
	}
	if err := s.launch(true); err != nil {
		t.Fatalf("pgserver: %v\n%s", err, serverproc.LogTail(s.logPath, logTailLines))
	}
	return s
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// DSN returns a connection string for the database "postgres" as the
// superuser, in the key=value form that pgx and lib/pq both accept.
func (s *Server) DSN() string { return s.DSNFor("postgres") }

// DSNFor returns a connection string for database db.
func (s *Server) DSNFor(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable connect_timeout=5", s.port, User, db)
}

// Open returns a database/sql handle (pgx stdlib driver) to the database
// "postgres", closed when the test ends.
func (s *Server) Open(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Stop shuts the server down cleanly (SIGINT: a fast shutdown, which aborts
// open transactions and disconnects clients), waiting until it has exited.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGINT)
}

// Kill kills the server and all its backends with SIGKILL, as a crash
// would; committed data survives (the WAL is replayed on the next start,
// although fsync is off, because the machine itself does not crash).
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Restart starts the server again on the same port with the same data,
// stopping it first (fast shutdown) if it is running, and waits until it
// accepts queries.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGINT)
	if err := s.launch(false); err != nil {
		t.Fatalf("pgserver: restart: %v\n%s", err, serverproc.LogTail(s.logPath, logTailLines))
	}
}

func (s *Server) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Stop(sig, stopTimeout)
	}
}

// launch starts postgres and waits until it is ready. With newPort it picks
// a free port first (and again after a failed attempt, in case another
// process took it); otherwise it keeps the port, as a restart must.
func (s *Server) launch(newPort bool) error {
	var err error
	for attempt := 0; attempt < startAttempts; attempt++ {
		if newPort || s.port == 0 {
			if s.port, err = serverproc.FreePort(); err != nil {
				return err
			}
		}
		var p *serverproc.Process
		if p, err = s.start(); err == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return nil
		}
		if !newPort {
			// After a kill the old backends may still be exiting, holding the
			// shared memory the new postmaster checks; give them a moment.
			time.Sleep(200 * time.Millisecond)
		}
	}
	return err
}

func (s *Server) start() (*serverproc.Process, error) {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return nil, err
	}
	cmd := s.command(s.postgres, "-D", s.dataDir, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1",
		// fsync off: the OS keeps what was written across a kill of the server,
		// which is all the fault tests do. synchronous_commit stays on, so a
		// committed transaction is in the WAL before COMMIT returns.
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "dynamic_shared_memory_type=mmap", // in the data directory: nothing left in /dev/shm
		"-c", "max_connections=200")
	cmd.Stdout = logf
	cmd.Stderr = logf
	p, err := serverproc.StartGroup(cmd) // a group: Kill reaches the backends too
	logf.Close()
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(p); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// waitReady polls the server until it answers a query showing that it is
// ours (its data directory), p exits, or startTimeout passes.
func (s *Server) waitReady(p *serverproc.Process) error {
	db, err := sql.Open("pgx", s.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(startTimeout)
	backoff := 10 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var dataDir string
		err := db.QueryRowContext(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir)
		cancel()
		if err == nil {
			if dataDir != s.dataDir {
				return fmt.Errorf("port %d answered by another server (data directory %s)", s.port, dataDir)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on port %d not ready after %v: %w", s.port, startTimeout, err)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-p.Done():
			timer.Stop()
			return fmt.Errorf("postgres exited before becoming ready (%v); see its log", p.State())
		case <-timer.C:
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// command prepares a PostgreSQL program to run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// server is a store process started by the benchmark.
type server struct {
	name string
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// freePort asks the kernel for an unused loopback port. Another process may
// take it before the server binds it, so callers retry on failure.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startProcess runs bin with args built for fresh ports until ready reports
// success, retrying a few times in case a port was taken meanwhile.
func startProcess(name, bin string, args func(dir string, ports [2]int) []string, ready func(addr string) error) (*server, error) {
	var lastErr error
	for range 5 {
		dir, err := os.MkdirTemp("", "dlock-bench-"+name+"-")
		if err != nil {
			return nil, err
		}
		var ports [2]int
		for i := range ports {
			if ports[i], err = freePort(); err != nil {
				return nil, err
			}
		}
		logFile, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, args(dir, ports)...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s: %w", bin, err)
		}
		s := &server{name: name, addr: "127.0.0.1:" + strconv.Itoa(ports[0]), cmd: cmd, dir: dir, done: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			logFile.Close()
			close(s.done)
		}()
		deadline := time.Now().Add(15 * time.Second)
		for {
			lastErr = ready(s.addr)
			if lastErr == nil {
				return s, nil
			}
			select {
			case <-s.done:
				lastErr = fmt.Errorf("%s exited early: %s", name, tail(filepath.Join(dir, name+".log")))
			case <-time.After(50 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
			}
			break
		}
		s.stop()
	}
	return nil, lastErr
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}

// interrupted holds the servers to stop when the benchmark is interrupted.
var interrupted struct {
	once    sync.Once
	mu      sync.Mutex
	servers []*server
}

// stopOnSignal makes an interrupt (SIGINT, SIGTERM) stop srv, removing its
// data directory, before the benchmark exits.
func stopOnSignal(srv *server) {
	interrupted.mu.Lock()
	interrupted.servers = append(interrupted.servers, srv)
	interrupted.mu.Unlock()
	interrupted.once.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sig
			interrupted.mu.Lock()
			for _, s := range interrupted.servers {
				s.stop()
			}
			os.Exit(130)
		}()
	})
}

// stop terminates the process, waits for it and removes its directory.
func (s *server) stop() {
	if s == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	os.RemoveAll(s.dir)
}

// cpuSeconds reads the process's user+system CPU time from /proc.
func (s *server) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

// startRedis starts a redis-server without persistence on a free port.
func startRedis() (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (or pass -redis host:port): %w", err)
	}
	return startProcess("redis", bin, func(dir string, p [2]int) []string {
		return []string{"--port", strconv.Itoa(p[0]), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--loglevel", "warning", "--maxclients", "20000"}
	}, func(addr string) error {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	})
}

// startEtcd starts a single-member etcd with a temporary data directory.
// It returns a nil server and a nil error when no etcd binary is installed.
func startEtcd() (*server, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, nil
	}
	return startProcess("etcd", bin, func(dir string, p [2]int) []string {
		client := "http://127.0.0.1:" + strconv.Itoa(p[0])
		peer := "http://127.0.0.1:" + strconv.Itoa(p[1])
		return []string{"--name", "bench", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "bench=" + peer, "--log-level", "error", "--logger", "zap"}
	}, func(addr string) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = cli.Get(ctx, "ready-probe")
		return err
	})
}

// etcdVersion returns the installed etcd's version line, or "".
func etcdVersion() string {
	out, err := exec.Command("etcd", "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

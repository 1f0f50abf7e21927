package redisserver

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerKillRestart(t *testing.T) {
	if os.Getenv(EnvAddr) != "" {
		t.Skip("needs a server started by the test")
	}
	s := Start(t)
	c := s.Client(t)
	ctx := t.Context()

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	port := s.Port()

	s.Kill()
	s.Kill() // idempotent
	if _, err := command(s.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("PING succeeded after Kill")
	}

	s.Restart()
	if s.Port() != port || !strings.HasSuffix(s.Addr(), ":"+strconv.Itoa(port)) {
		t.Fatalf("port changed: %d -> %d (%s)", port, s.Port(), s.Addr())
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if v, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %q, %v; want redis.Nil", v, err)
	}

	s.Stop()
	s.Stop() // idempotent; the cleanup runs after a manual stop as well
}

func TestServerWithArgs(t *testing.T) {
	if os.Getenv(EnvAddr) != "" {
		t.Skip("needs a server started by the test")
	}
	s := Start(t, WithArgs("--maxmemory", "12mb"))
	got, err := s.Client(t).ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	if got["maxmemory"] != "12582912" {
		t.Fatalf("maxmemory = %q, want 12582912", got["maxmemory"])
	}
	s.Restart() // extra args survive a restart
	got, err = s.Client(t).ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12582912" {
		t.Fatalf("after Restart: maxmemory = %q, %v", got["maxmemory"], err)
	}
}

func TestServerExternal(t *testing.T) {
	if os.Getenv(EnvAddr) != "" {
		t.Skip("already running against an external server")
	}
	owned := Start(t)
	if err := owned.Client(t).Set(t.Context(), "stale", "1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	var flushed bool
	ok := t.Run("external", func(t *testing.T) {
		t.Setenv(EnvAddr, owned.Addr())
		ext := Start(t)
		if ext.Addr() != owned.Addr() || ext.Port() != owned.Port() {
			t.Fatalf("external server at %s, want %s", ext.Addr(), owned.Addr())
		}
		n, err := ext.Client(t).Exists(t.Context(), "stale").Result()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		flushed = n == 0
		ext.Kill() // must skip
		t.Error("Kill did not skip with an external server")
	})
	if !ok || !flushed {
		t.Fatalf("external subtest ok=%v flushed=%v", ok, flushed)
	}
	if err := owned.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("owned server hurt by external use: %v", err)
	}
}

func TestServerRestartRetriesBusyPort(t *testing.T) {
	if os.Getenv(EnvAddr) != "" {
		t.Skip("needs a server started by the test")
	}
	s := Start(t)
	s.Kill()

	// Hold the port for a moment so the first Restart attempts fail.
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("occupying %s: %v", s.Addr(), err)
	}
	release := time.AfterFunc(100*time.Millisecond, func() { _ = ln.Close() })
	defer release.Stop()

	s.Restart()
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
}

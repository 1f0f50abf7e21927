package zkdriver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
)

func TestParseServersInvalid(t *testing.T) {
	for _, s := range []string{"", "  ", "a:2181,,b:2181", "zk://a:2181", "a:0", "a:65536", "a:port", "a/chroot", ":2181", "a:1:2"} {
		if _, err := ParseServers(s); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("ParseServers(%q) = %v, want ErrInvalidArgument", s, err)
		}
		if _, err := Open(s); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", s, err)
		}
	}
}

// A server without a port gets ZooKeeper's 2181, a bracketed IPv6 address
// too (it became "[[::1]]:2181" before).
func TestParseServersDefaultPort(t *testing.T) {
	got, err := ParseServers("a,b:2182,[::1],[::1]:2183")
	want := []string{"a:2181", "b:2182", "[::1]:2181", "[::1]:2183"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ParseServers = %q, %v; want %q", got, err, want)
	}
}

func TestNewInvalid(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v", err)
	}
	n := zkserver.Shared(t)
	conn, _ := dial(t, n.Addr(), testSession)
	for _, p := range []string{"", "/", "rel", "/a/", "/a//b", "/a/../b"} {
		if _, err := New(conn, WithPrefix(p)); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("WithPrefix(%q) = %v, want ErrInvalidArgument", p, err)
		}
	}
	if _, err := New(conn, WithSessionTimeout(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithSessionTimeout(0) = %v", err)
	}
	// Without the granted timeout, a default assumed longer than granted
	// would let leases outlive the session.
	if _, err := New(conn); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New without WithSessionTimeout = %v, want ErrInvalidArgument", err)
	}
}

// TestOpen: Open learns the session timeout the servers grant, and the
// Client's default TTL fits in it; a TTL that does not is refused.
func TestOpen(t *testing.T) {
	n := zkserver.Shared(t)
	c, err := Open(n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "open")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The test servers grant up to 90 s, so the 45 s asked for: MaxTTL
	// 30 s, dlock's default.
	if _, err := c.Lock(ctx, "long", dlock.WithTTL(30*time.Second+time.Millisecond)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Lock with a TTL above MaxTTL: %v, want ErrInvalidArgument", err)
	}
}

// TestOpenNoServer: Open fails with ErrBackend when no server answers,
// by its context's deadline.
func TestOpenNoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := OpenContext(ctx, "127.0.0.1:1"); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("OpenContext with no server: %v, want ErrBackend", err)
	}
}

// The granted session timeout comes from go-zookeeper's handshake line,
// in the form of the pinned version; until that line, it is unknown, and
// connect waits for it (never assuming the timeout it asked for, which the
// servers may have cut).
func TestSessionLogReadsTheGrantedTimeout(t *testing.T) {
	l := newSessionLog(slog.New(slog.DiscardHandler))
	l.Printf("connected to %s", "127.0.0.1:2181")
	select {
	case <-l.learned:
		t.Fatalf("learned a timeout (%v) before the handshake line", l.timeout())
	default:
	}
	l.Printf("authenticated: id=%d, timeout=%d", int64(72057), int32(4000))
	select {
	case <-l.learned:
	default:
		t.Fatal("not learned after the handshake line")
	}
	if got := l.timeout(); got != 4*time.Second {
		t.Fatalf("timeout %v after the handshake line, want 4s", got)
	}
}

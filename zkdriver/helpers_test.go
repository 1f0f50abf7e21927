package zkdriver

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// testSession is the session timeout tests ask for: long enough for the
// suite's 30 s leases (MaxTTL is two thirds of it).
const testSession = 60 * time.Second

// dial connects to servers for t and returns the connection and the
// session timeout granted; the connection is closed at the test's end.
func dial(t testing.TB, servers string, timeout time.Duration) (*zk.Conn, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, granted, err := connect(ctx, strings.Split(servers, ","), timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn, granted
}

// newDriver makes a Driver on its own connection and prefix.
func newDriver(t testing.TB, servers, prefix string) *Driver {
	t.Helper()
	conn, granted := dial(t, servers, testSession)
	d, err := New(conn, WithPrefix(prefix), WithSessionTimeout(granted))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

package zkdriver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
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

func newTestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func acquireReq(key, id string, ttl time.Duration) driver.AcquireRequest {
	return driver.AcquireRequest{Key: key, ID: id, TTL: ttl}
}

func releaseAll(t testing.TB, d *Driver, reqs ...driver.AcquireRequest) {
	t.Helper()
	rs := make([]driver.ReleaseRequest, len(reqs))
	for i, r := range reqs {
		rs[i] = driver.ReleaseRequest{Key: r.Key, ID: r.ID}
	}
	res, err := d.Release(context.Background(), rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != driver.Released {
			t.Fatalf("release of %q: %v, want Released", rs[i].Key, r)
		}
	}
}

package redisdriver

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

// Open makes a working Client whose Close also closes its Redis client:
// the server sees the connections go.
func TestOpen(t *testing.T) {
	srv := redisserver.Start(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open("redis://"+srv.Addr()+"/0?client_name=opened", dlock.WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := c.TryLock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if v := admin.Get(ctx, DefaultPrefix+"{k}").Val(); !strings.Contains(v, ":") || lease.Token() == 0 {
		t.Fatalf("lock value %q, token %d", v, lease.Token())
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	opened := func() bool {
		list, err := admin.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(list, "name=opened")
	}
	if !opened() {
		t.Fatal("no connection of the opened client")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "connections closed", func() bool { return !opened() })
}

func TestOpenRejectsBadArguments(t *testing.T) {
	if _, err := Open("localhost:6379"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("URL without scheme: %v", err)
	}
	if _, err := Open("redis://127.0.0.1:1", nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil option: %v", err)
	}
}

// A driver made by New leaves the client to its owner; one that owns it
// closes it, once.
func TestCloseOwnsOnlyItsClient(t *testing.T) {
	srv := redisserver.Start(t)
	ctx := context.Background()
	rdb := srv.Client(t)
	if err := newDriver(t, rdb).Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("New's driver closed the caller's client: %v", err)
	}
	d := newDriver(t, rdb)
	d.ownsClient = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("the owned client still works after Close")
	}
}

// aclServer starts a redis-server with the user dl, password s3cretPW.
func aclServer(t *testing.T) *redisserver.Server {
	t.Helper()
	return redisserver.Start(t, redisserver.WithArgs("--user", "dl", "on", ">s3cretPW", "~*", "&*", "+@all"))
}

// password_file reaches an ACL user: the file's password replaces the
// URL's, and a wrong one is refused by the server.
func TestOpenPasswordFileReachesAnACLUser(t *testing.T) {
	srv := aclServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := url.QueryEscape(writeTemp(t, "pw", "s3cretPW\n"))
	bad := url.QueryEscape(writeTemp(t, "bad", "wrong\n"))
	for _, raw := range []string{
		"redis://dl@" + srv.Addr() + "/0?password_file=" + good,
		"redis://dl:wrong@" + srv.Addr() + "/0?password_file=" + good,
	} {
		rdb := mustParseURL(t, raw)
		if who, err := rdb.Do(ctx, "ACL", "WHOAMI").Text(); err != nil || who != "dl" {
			t.Fatalf("%s: ACL WHOAMI = %q, %v", RedactURL(raw), who, err)
		}
		c, err := Open(raw, dlock.WithDefaultTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lease, err := c.TryLock(ctx, "k")
		if err != nil {
			t.Fatalf("%s: %v", RedactURL(raw), err)
		}
		_ = lease.Unlock(ctx)
		_ = c.Close()
	}
	c, err := Open("redis://dl:s3cretPW@"+srv.Addr()+"/0?password_file="+bad, dlock.WithDefaultTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryLock(ctx, "k"); !errors.Is(err, dlock.ErrBackend) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("wrong password in the file: %v, want the server's WRONGPASS as ErrBackend", err)
	}
}

// A TLS server that requires client certificates is reached with
// ca_file, cert_file and key_file; without the client certificate, or
// trusting another CA, a call fails as a backend error.
func TestOpenTLSWithClientCertificate(t *testing.T) {
	f := redisserver.NewTLSFiles(t)
	srv := redisserver.Start(t, redisserver.WithTLS(f))
	q := url.QueryEscape
	base := "rediss://" + srv.Addr() + "/0?"
	ca, client := "ca_file="+q(f.CA), "&cert_file="+q(f.ClientCert)+"&key_file="+q(f.ClientKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	try := func(raw string) error {
		c, err := Open(raw, dlock.WithDefaultTTL(time.Second))
		if err != nil {
			t.Fatalf("Open(%s): %v", raw, err)
		}
		defer c.Close()
		lease, err := c.TryLock(ctx, "k")
		if err == nil {
			_ = lease.Unlock(ctx)
		}
		return err
	}
	if err := try(base + ca + client); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if err := try(base + "insecure_skip_verify=true" + client); err != nil {
		t.Fatalf("insecure_skip_verify with the client certificate: %v", err)
	}
	for what, raw := range map[string]string{
		"without a client certificate": base + ca,
		"trusting another CA":          base + "ca_file=" + q(f.OtherCA) + client,
		"with the system roots":        "rediss://" + srv.Addr() + "/0?" + strings.TrimPrefix(client, "&"),
	} {
		if err := try(raw); !errors.Is(err, dlock.ErrBackend) {
			t.Errorf("%s: %v, want ErrBackend", what, err)
		}
	}
	if err := srv.Client(t).Get(ctx, DefaultPrefix+"{k}").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
}

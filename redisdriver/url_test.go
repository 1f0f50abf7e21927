package redisdriver

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
	"github.com/redis/go-redis/v9"
)

func mustParseURL(t *testing.T, raw string) redis.UniversalClient {
	t.Helper()
	c, err := ParseURL(raw)
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", raw, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestParseURLStandalone(t *testing.T) {
	c, ok := mustParseURL(t, "redis://:s3cret@db.example:6380/2?dial_timeout=2s").(*redis.Client)
	if !ok {
		t.Fatal("not a plain client")
	}
	o := c.Options()
	if o.Addr != "db.example:6380" || o.DB != 2 || o.Password != "s3cret" || o.DialTimeout != 2*time.Second ||
		!o.ContextTimeoutEnabled || o.DialerRetries != dialerRetries || o.TLSConfig != nil {
		t.Fatalf("options %+v", o)
	}
	o = mustParseURL(t, "rediss://db.example").(*redis.Client).Options()
	if o.TLSConfig == nil || o.Addr != "db.example:6379" {
		t.Fatalf("rediss: %+v", o)
	}
}

func TestParseURLSentinel(t *testing.T) {
	raw := "redis+sentinel://:pw@s1,s2:26380,[::1]:26381/mymaster/3?sentinel_password=spw"
	c, ok := mustParseURL(t, raw).(*redis.Client) // a failover client is a *redis.Client
	if !ok {
		t.Fatal("not a failover client")
	}
	if o := c.Options(); o.DB != 3 || o.Password != "pw" || !o.ContextTimeoutEnabled || o.DialerRetries != dialerRetries {
		t.Fatalf("options %+v", o)
	}
	l, err := parseHostList(strings.TrimPrefix(raw, "redis+sentinel://"), 26379)
	if want := []string{"s1:26379", "s2:26380", "[::1]:26381"}; err != nil || !reflect.DeepEqual(l.hosts, want) || l.path != "mymaster/3" {
		t.Fatalf("hosts %v, path %q, %v", l.hosts, l.path, err)
	}
	if o := mustParseURL(t, "rediss+sentinel://s1/m").(*redis.Client).Options(); o.TLSConfig == nil || o.DB != 0 {
		t.Fatalf("rediss+sentinel: %+v", o)
	}
}

func TestParseURLCluster(t *testing.T) {
	c, ok := mustParseURL(t, "redis+cluster://u:pw@n1:7000,n2:7001,n3?read_timeout=1s").(*redis.ClusterClient)
	if !ok {
		t.Fatal("not a cluster client")
	}
	o := c.Options()
	if want := []string{"n1:7000", "n2:7001", "n3:6379"}; !reflect.DeepEqual(o.Addrs, want) || o.Username != "u" || o.Password != "pw" ||
		o.ReadTimeout != time.Second || !o.ContextTimeoutEnabled || o.DialerRetries != dialerRetries {
		t.Fatalf("options %+v", o)
	}
	if o := mustParseURL(t, "redis+cluster://n1?dialer_retries=3").(*redis.ClusterClient).Options(); o.DialerRetries != 3 {
		t.Fatalf("dialer_retries from the URL: %d", o.DialerRetries)
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, raw := range []string{
		"", "localhost:6379", "http://x", "redis+ring://a", "unix+cluster://a",
		"redis://:pw@a/notanumber",
		"redis+sentinel://s1:26379", "redis+sentinel://s1:26379/", "redis+sentinel://s1,,s2/m",
		"redis+sentinel://s1:0/m", "redis+sentinel://:pw@s1:99999/m", "redis+sentinel://s1/m/x",
		"redis+cluster://n1/3", "redis+cluster://:pw@n1?bogus_option=1",
		"redis://127.0.0.1:99999/0", "redis://127.0.0.1:0",
		// Unescaped '/', '?' or '#' in a password: the parse errors quote it.
		"redis://u:pw/sek@127.0.0.1:1/0", "redis://u:pw?sek@127.0.0.1/0", "redis://u:pw#sek@h/0",
		"redis+sentinel://u:pw/sek@s1/m", "redis+cluster://u:pw/sek@n1",
	} {
		_, err := ParseURL(raw)
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", raw, err)
		}
		if err != nil && (strings.Contains(err.Error(), ":pw@") || strings.Contains(err.Error(), "sek")) {
			t.Errorf("ParseURL(%q): the error shows the password: %v", raw, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:pw@h:1/0":             "redis://:xxxxx@h:1/0",
		"redis://u:pw@h/0?x=@":          "redis://u:xxxxx@h/0?x=@",
		"redis://u@h":                   "redis://u@h",
		"redis+sentinel://:a@b@s1,s2/m": "redis+sentinel://:xxxxx@s1,s2/m",
		"redis://u:sek/rit@h:1/0":       "redis://u:xxxxx@h:1/0",
		"redis://u:se?k#r@h/0?x=1":      "redis://u:xxxxx@h/0?x=1",
		"":                              "",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// refusedAddr returns a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A server that refuses connections fails a call promptly, in every
// deployment form (go-redis's defaults took 1.7–3.4 s). The bound is a
// hang check, generous for slow machines.
func TestRefusedConnectionFailsFast(t *testing.T) {
	addr := refusedAddr(t)
	for _, raw := range []string{"redis://" + addr, "redis+cluster://" + addr, "redis+sentinel://" + addr + "/m"} {
		c := mustParseURL(t, raw)
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err = d.Acquire(ctx, driver.AcquireRequest{Key: "k", ID: "a", TTL: time.Second})
		took := time.Since(start)
		cancel()
		if err == nil || took > time.Second {
			t.Errorf("%s: %v after %v, want an error well within a second", raw, err, took)
		}
	}
}

// TestMissingDatabaseIsAnInvalidArgument: a database number the server
// does not have is a mistake in the URL, an invalid argument, in a
// Client's calls and in a pipeline of the client ParseURL made: not a
// store failure that a retry could fix.
func TestMissingDatabaseIsAnInvalidArgument(t *testing.T) {
	srv := redisserver.Start(t)
	raw := "redis://:s3cret@" + srv.Addr() + "/99"
	invalid := func(what string, err error) {
		t.Helper()
		var rerr redis.Error
		switch {
		case !errors.Is(err, dlock.ErrInvalidArgument) || errors.Is(err, dlock.ErrBackend):
			t.Errorf("%s: %v; want an invalid argument, not a backend failure", what, err)
		case !strings.Contains(err.Error(), "no database 99") || strings.Contains(err.Error(), "s3cret"):
			t.Errorf("%s: %q; want the database named and the password hidden", what, err)
		case !errors.As(err, &rerr):
			t.Errorf("%s: %v does not unwrap to the server's answer", what, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, err = c.TryLock(ctx, "k")
	invalid("TryLock", err)
	_, _, err = c.Inspect(ctx, "k")
	invalid("Inspect", err)
	rdb := mustParseURL(t, raw)
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Get(ctx, "a")
		p.Get(ctx, "b")
		return nil
	})
	invalid("pipeline", err)
	for _, cmd := range cmds {
		if cmd.Err() != nil { // go-redis leaves them unset when the connection fails
			invalid("pipelined "+cmd.Name(), cmd.Err())
		}
	}
	// A database the server has works.
	if err := mustParseURL(t, "redis://"+srv.Addr()+"/1").Ping(ctx).Err(); err != nil {
		t.Errorf("PING on database 1: %v", err)
	}
}

func TestNewRejectsNilClients(t *testing.T) {
	for _, c := range []redis.UniversalClient{nil, (*redis.Client)(nil), (*redis.ClusterClient)(nil), (*redis.Ring)(nil)} {
		if _, err := New(c); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("New(%#v) = %v, want ErrInvalid", c, err)
		}
	}
	c := redis.NewClient(&redis.Options{Addr: refusedAddr(t)})
	defer c.Close()
	if _, err := New(c, nil); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("nil option: %v", err)
	}
	if _, err := New(c, WithPrefix("a{b")); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("prefix with a brace: %v", err)
	}
}

func TestCapabilitiesAndKeys(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: refusedAddr(t)})
	defer c.Close()
	d := newDriver(t, c)
	want := driver.Capabilities{TTLUnit: time.Millisecond, MinTTL: 20 * time.Millisecond,
		ExpiryMargin: 2 * time.Millisecond, MaxBatch: 1000, ContextAware: false, QueueByDefault: true}
	if got := d.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
	for _, k := range badKeys {
		if err := d.CheckKey(k); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("CheckKey(%q) = %v, want ErrInvalid", k, err)
		}
	}
	for _, k := range []string{"x", "x}", "{x}", "a}b", "k:last"} {
		if err := d.CheckKey(k); err != nil {
			t.Errorf("CheckKey(%q) = %v", k, err)
		}
	}
}

// No error of ParseURL shows a secret, whatever the form: a password in
// the userinfo (with or without a scheme) or a *password query parameter.
func TestParseURLErrorsHideEverySecret(t *testing.T) {
	const pw, spw = "SECRETPW", "SENTSECRET"
	for _, raw := range []string{
		"redis+sentinel://127.0.0.1:26379/?sentinel_password=" + spw,
		"redis+sentinel://127.0.0.1:0/m?sentinel_password=" + spw,
		"redis+sentinel://u:" + pw + "@127.0.0.1:26379/?sentinel_password=" + spw,
		"u:" + pw + "@127.0.0.1:16379",
		":" + pw + "@127.0.0.1:16379/0",
		"u:" + pw + "@127.0.0.1:16379?sentinel_password=" + spw,
		"redis://h:99x/0?sentinel_password=" + spw,
		"redis://u:" + pw + "@h:99999/0",
		"redis://h/0?password=" + pw,
		"redis+cluster://n1:x?sentinel_password=" + spw,
		"redis+cluster://n1?sentinel_password=" + spw,
		"rediss://u:" + pw + "@h/0?skip_verify=true",
		"rediss://h/0?ca_file=/nonexistent/ca.pem&sentinel_password=" + spw,
		"redis://h/0?password_file=/nonexistent/pw&sentinel_password=" + spw,
		"ftp://u:" + pw + "@h",
	} {
		_, err := ParseURL(raw)
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalid", raw, err)
			continue
		}
		if strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), spw) {
			t.Errorf("ParseURL(%q): the error shows a secret: %v", raw, err)
		}
	}
}

func TestRedactURLHidesQueryPasswordsAndSchemelessUserinfo(t *testing.T) {
	for raw, want := range map[string]string{
		"redis+sentinel://h:26379/m?sentinel_password=S&db=1":             "redis+sentinel://h:26379/m?sentinel_password=xxxxx&db=1",
		"redis+sentinel://:p@h/m?sentinel_username=u&sentinel_password=S": "redis+sentinel://:xxxxx@h/m?sentinel_username=u&sentinel_password=xxxxx",
		"u:SECRET@127.0.0.1:16379":                                        "u:xxxxx@127.0.0.1:16379",
		"h:1/0?password=S#frag":                                           "h:1/0?password=xxxxx#frag",
		"redis://h/0?password_file=/run/pw":                               "redis://h/0?password_file=/run/pw",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}

// writeTemp writes content to a new file in t's temporary directory.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The TLS parameters set the client's TLS configuration, on every TLS
// form; password_file replaces the userinfo password.
func TestParseURLTLSAndPasswordFile(t *testing.T) {
	f := redisserver.NewTLSFiles(t)
	tlsQuery := "ca_file=" + url.QueryEscape(f.CA) + "&cert_file=" + url.QueryEscape(f.ClientCert) + "&key_file=" + url.QueryEscape(f.ClientKey)
	pwFile := writeTemp(t, "pw", "fromfile\n")
	o := mustParseURL(t, "rediss://u:inurl@127.0.0.1:6380/1?dial_timeout=2s&"+tlsQuery+"&password_file="+url.QueryEscape(pwFile)).(*redis.Client).Options()
	if o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || len(o.TLSConfig.Certificates) != 1 || o.TLSConfig.InsecureSkipVerify ||
		o.TLSConfig.ServerName != "127.0.0.1" || o.Password != "fromfile" || o.Username != "u" || o.DB != 1 || o.DialTimeout != 2*time.Second {
		t.Fatalf("rediss: %+v", o)
	}
	if o := mustParseURL(t, "redis://127.0.0.1/0?password_file="+url.QueryEscape(writeTemp(t, "crlf", "pw2\r\n"))).(*redis.Client).Options(); o.Password != "pw2" {
		t.Errorf("password from a CRLF file: %q", o.Password)
	}
	o = mustParseURL(t, "rediss+sentinel://s1,s2/m?"+tlsQuery+"&password_file="+url.QueryEscape(pwFile)).(*redis.Client).Options()
	if o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || len(o.TLSConfig.Certificates) != 1 || o.Password != "fromfile" ||
		o.TLSConfig.ServerName != "" {
		t.Fatalf("rediss+sentinel: %+v", o)
	}
	co := mustParseURL(t, "rediss+cluster://n1,n2?"+tlsQuery+"&password_file="+url.QueryEscape(pwFile)).(*redis.ClusterClient).Options()
	if co.TLSConfig == nil || co.TLSConfig.RootCAs == nil || len(co.TLSConfig.Certificates) != 1 || co.Password != "fromfile" ||
		co.TLSConfig.ServerName != "" || co.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Fatalf("rediss+cluster: %+v", co)
	}
	if o := mustParseURL(t, "rediss://h/0?insecure_skip_verify=true").(*redis.Client).Options(); !o.TLSConfig.InsecureSkipVerify {
		t.Error("insecure_skip_verify=true not applied")
	}
	if o := mustParseURL(t, "rediss://h/0?insecure_skip_verify=false").(*redis.Client).Options(); o.TLSConfig.InsecureSkipVerify {
		t.Error("insecure_skip_verify=false turned verification off")
	}
}

func TestParseURLRefusesBadTLSAndPasswordParams(t *testing.T) {
	f := redisserver.NewTLSFiles(t)
	q := url.QueryEscape
	empty := writeTemp(t, "empty", "\n")
	for _, tc := range []struct{ raw, says string }{
		{"rediss://h/0?cert_file=" + q(f.ClientCert), "key_file"},
		{"rediss://h/0?key_file=" + q(f.ClientKey), "cert_file"},
		{"rediss://h/0?cert_file=" + q(f.ClientCert) + "&key_file=" + q(f.ServerKey), "cert_file"}, // not its key
		{"rediss://h/0?ca_file=/nonexistent/ca.pem", "ca_file"},
		{"rediss://h/0?ca_file=" + q(f.ClientKey), "ca_file"}, // no certificate in it
		{"rediss://h/0?skip_verify=true", "insecure_skip_verify"},
		{"rediss+sentinel://s1/m?skip_verify=true", "insecure_skip_verify"},
		{"rediss+cluster://n1?skip_verify=true", "insecure_skip_verify"},
		{"rediss://h/0?insecure_skip_verify=maybe", "insecure_skip_verify"},
		{"redis://h/0?insecure_skip_verify=true", "TLS"},
		{"redis://h/0?ca_file=" + q(f.CA), "TLS"},
		{"redis+sentinel://s1/m?cert_file=" + q(f.ClientCert) + "&key_file=" + q(f.ClientKey), "TLS"},
		{"redis+cluster://n1?ca_file=" + q(f.CA), "TLS"},
		{"unix:///tmp/redis.sock?ca_file=" + q(f.CA), "TLS"},
		{"redis://h/0?password_file=/nonexistent/pw", "password_file"},
		{"redis://h/0?password_file=" + q(empty), "password_file"},
		{"redis+cluster://n1?password_file=/nonexistent/pw", "password_file"},
	} {
		_, err := ParseURL(tc.raw)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidArgument naming %s", tc.raw, err, tc.says)
		}
	}
}

package redisdriver

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock/driver"
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

package redisconn

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestParseStandalone(t *testing.T) {
	tg, err := Parse("redis://:s3cret@db.example:6380/2?dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	o := tg.single
	if tg.Mode() != Standalone || o.Addr != "db.example:6380" || o.DB != 2 || o.Password != "s3cret" ||
		o.DialTimeout.Seconds() != 2 || !o.ContextTimeoutEnabled || o.TLSConfig != nil {
		t.Fatalf("got %+v", o)
	}
	if strings.Contains(tg.String(), "s3cret") {
		t.Fatalf("String leaks the password: %s", tg)
	}
	tg, err = Parse("rediss://db.example")
	if err != nil || tg.single.TLSConfig == nil || tg.single.Addr != "db.example:6379" {
		t.Fatalf("rediss: %+v, %v", tg, err)
	}
}

func TestParseSentinel(t *testing.T) {
	tg, err := Parse("redis+sentinel://:pw@s1,s2:26380,[::1]:26381/mymaster/3?sentinel_password=spw")
	if err != nil {
		t.Fatal(err)
	}
	f := tg.failover
	want := []string{"s1:26379", "s2:26380", "[::1]:26381"}
	if tg.Mode() != Sentinel || f.MasterName != "mymaster" || f.DB != 3 || f.Password != "pw" ||
		f.SentinelPassword != "spw" || !reflect.DeepEqual(f.SentinelAddrs, want) || f.TLSConfig != nil {
		t.Fatalf("got %+v", f)
	}
	tg, err = Parse("rediss+sentinel://s1/m")
	if err != nil || tg.failover.TLSConfig == nil || tg.failover.DB != 0 {
		t.Fatalf("rediss+sentinel: %+v, %v", tg, err)
	}
}

func TestParseCluster(t *testing.T) {
	tg, err := Parse("redis+cluster://u:pw@n1:7000,n2:7001,n3?read_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	c := tg.cluster
	want := []string{"n1:7000", "n2:7001", "n3:6379"}
	if tg.Mode() != Cluster || !reflect.DeepEqual(c.Addrs, want) || c.Username != "u" || c.Password != "pw" ||
		c.ReadTimeout.Seconds() != 1 || !c.ContextTimeoutEnabled {
		t.Fatalf("got %+v", c)
	}
	if _, ok := tg.NewClient().(*redis.ClusterClient); !ok {
		t.Fatal("not a cluster client")
	}
}

func TestParseErrors(t *testing.T) {
	for _, raw := range []string{
		"", "localhost:6379", "http://x", "redis+ring://a", "unix+cluster://a",
		"redis://a/notanumber",
		"redis+sentinel://s1:26379", "redis+sentinel://s1:26379/", "redis+sentinel://s1,,s2/m",
		"redis+sentinel://s1:0/m", "redis+sentinel://s1:99999/m", "redis+sentinel://s1/m/x",
		"redis+cluster://n1/3", "redis+cluster://n1?bogus_option=1",
	} {
		if _, err := Parse(raw); !errors.Is(err, ErrBadURL) {
			t.Errorf("Parse(%q) = %v, want ErrBadURL", raw, err)
		}
	}
}

func TestMask(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://:pw@h:1/0":             "redis://:xxxxx@h:1/0",
		"redis://u:pw@h/0?x=@":          "redis://u:xxxxx@h/0?x=@",
		"redis://u@h":                   "redis://u@h",
		"redis+sentinel://:a@b@s1,s2/m": "redis+sentinel://:xxxxx@s1,s2/m",
	} {
		if got := mask(raw); got != want {
			t.Errorf("mask(%q) = %q, want %q", raw, got, want)
		}
	}
}

package etcddriver

import (
	"errors"
	"slices"
	"testing"

	"github.com/dlockio/dlock/driver"
)

func TestParseEndpoints(t *testing.T) {
	for _, c := range []struct {
		in        string
		endpoints []string
		user      string
		password  string
		tls       bool
	}{
		{in: "127.0.0.1:2379", endpoints: []string{"127.0.0.1:2379"}},
		{in: "h1:2379, h2:2379,h3:2379", endpoints: []string{"h1:2379", "h2:2379", "h3:2379"}},
		{in: "http://h1:2379,http://h2:2379/", endpoints: []string{"h1:2379", "h2:2379"}},
		{in: "https://h1:2379", endpoints: []string{"h1:2379"}, tls: true},
		{in: "etcd://h1:2379,h2:2379", endpoints: []string{"h1:2379", "h2:2379"}},
		{in: "etcd://root:p%40ss@h1:2379", endpoints: []string{"h1:2379"}, user: "root", password: "p@ss"},
		{in: "etcds://h1:2379", endpoints: []string{"h1:2379"}, tls: true},
		{in: "[::1]:2379", endpoints: []string{"[::1]:2379"}},
	} {
		cfg, err := ParseEndpoints(c.in)
		if err != nil {
			t.Errorf("ParseEndpoints(%q): %v", c.in, err)
			continue
		}
		if !slices.Equal(cfg.Endpoints, c.endpoints) || cfg.Username != c.user || cfg.Password != c.password || (cfg.TLS != nil) != c.tls {
			t.Errorf("ParseEndpoints(%q) = %v user %q password %q tls %v", c.in, cfg.Endpoints, cfg.Username, cfg.Password, cfg.TLS != nil)
		}
		if cfg.DialTimeout != 0 {
			t.Errorf("ParseEndpoints(%q): DialTimeout %v would make clientv3.New block", c.in, cfg.DialTimeout)
		}
	}
	for _, bad := range []string{"", " ", "h1", "h1:", ":2379", "redis://h1:6379", "h1:2379,,h2:2379", "etcd://", "etcd://u:p@"} {
		if _, err := ParseEndpoints(bad); !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ParseEndpoints(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := Open("nonsense"); !errors.Is(err, driver.ErrInvalid) {
		t.Errorf("Open(nonsense) = %v, want ErrInvalid", err)
	}
}

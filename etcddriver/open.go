package etcddriver

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Connection health checks of the clients Open makes.
const (
	// keepAliveTime and keepAliveTimeout make gRPC notice a connection
	// whose peer went silent (a partition, a paused member) and reconnect
	// to another endpoint.
	keepAliveTime    = 2 * time.Second
	keepAliveTimeout = time.Second
)

// Open is the one-call setup: it makes an etcd client for endpoints (see
// ParseEndpoints for the forms), a Driver that owns it, and a dlock Client
// on that driver. Closing the Client closes the etcd client too.
//
// Like database/sql.Open it does not wait for a connection: an unreachable
// cluster shows in the first call, which fails at its context's deadline
// or after the driver's request timeout (DefaultRequestTimeout), whichever
// is first. Drivers with Options, or clients built by the application, go
// through New and dlock.New instead.
func Open(endpoints string, opts ...dlock.Option) (*dlock.Client, error) {
	cfg, err := ParseEndpoints(endpoints)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %q: %w", endpoints, err)
	}
	d, err := New(cli)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	d.ownsClient = true
	c, err := dlock.New(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return c, nil
}

// ParseEndpoints makes an etcd client configuration from
//
//	host:2379,host2:2379                    plain endpoints, as etcdctl --endpoints takes them
//	http://host:2379,http://host2:2379      the same, with schemes (https:// uses TLS, system roots)
//	etcd://[user:password@]host:2379,host2:2379
//	etcds://[user:password@]host:2379,...   TLS, system roots
//
// Errors match driver.ErrInvalid. The configuration does not block on
// dialling (see Open).
func ParseEndpoints(s string) (clientv3.Config, error) {
	cfg := clientv3.Config{
		DialTimeout:          0, // do not block in clientv3.New
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		Logger:               zap.NewNop(), // dlock reports what matters through slog
	}
	invalid := func(why string) (clientv3.Config, error) {
		return clientv3.Config{}, fmt.Errorf("%w: etcd endpoints %q: %s", driver.ErrInvalid, s, why)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return invalid("empty")
	}
	useTLS := false
	if scheme, rest, ok := strings.Cut(s, "://"); ok && (scheme == "etcd" || scheme == "etcds") {
		useTLS = scheme == "etcds"
		if userinfo, hosts, ok := strings.Cut(rest, "@"); ok {
			u, err := url.Parse("x://" + userinfo + "@h")
			if err != nil || u.User == nil {
				return invalid("bad user information")
			}
			cfg.Username = u.User.Username()
			cfg.Password, _ = u.User.Password()
			rest = hosts
		}
		s = strings.TrimSuffix(rest, "/")
	}
	for _, ep := range strings.Split(s, ",") {
		ep = strings.TrimSpace(ep)
		hostport := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			switch scheme {
			case "http":
			case "https":
				useTLS = true
			default:
				return invalid(fmt.Sprintf("scheme %q (want http, https, etcd or etcds)", scheme))
			}
			hostport = strings.TrimSuffix(rest, "/")
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" || port == "" {
			return invalid(fmt.Sprintf("endpoint %q is not host:port", ep))
		}
		cfg.Endpoints = append(cfg.Endpoints, hostport)
	}
	if useTLS {
		cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

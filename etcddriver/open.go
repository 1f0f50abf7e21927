package etcddriver

import (
	"context"
	"errors"
	"fmt"
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

// Open is OpenContext without a context: authentication, when the spec
// has a user, is bounded by DefaultRequestTimeout alone.
func Open(endpoints string, opts ...dlock.Option) (*dlock.Client, error) {
	return OpenContext(context.Background(), endpoints, opts...)
}

// OpenContext is the one-call setup: it makes an etcd client for endpoints
// (see ParseEndpoints for the forms), a Driver that owns it, and a dlock
// Client on that driver. Closing the Client closes the etcd client too.
//
// Without a user name it does not wait for a connection, like
// database/sql.Open: an unreachable cluster shows in the first call, which
// fails at once if no endpoint accepts connections (see ParseEndpoints),
// else at its context's deadline or after the driver's request timeout
// (DefaultRequestTimeout), whichever is first. With one, the etcd client
// authenticates before it returns, for up to DefaultRequestTimeout or
// until ctx ends: a failure (wrong password, refused connections, no
// answer) matches dlock.ErrBackend, and ctx's end matches ctx.Err(). Errors show the spec
// with its password masked (RedactEndpoints). Drivers with Options, or
// clients built by the application, go through New and dlock.New instead.
func OpenContext(ctx context.Context, endpoints string, opts ...dlock.Option) (*dlock.Client, error) {
	cfg, err := ParseEndpoints(endpoints)
	if err != nil {
		return nil, err
	}
	cli, err := newClient(ctx, cfg, RedactEndpoints(strings.TrimSpace(endpoints)))
	if err != nil {
		return nil, err
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

// newClient is clientv3.New bounded by ctx as well as by cfg.DialTimeout
// (New authenticates a user before it returns, with no other bound).
// shown is the spec for messages.
func newClient(ctx context.Context, cfg clientv3.Config, shown string) (*clientv3.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("etcd client for %q: %w", shown, err)
	}
	// cfg.Context is the client's whole life, so it cannot be ctx: it is a
	// context of its own, which ctx ends only while New runs.
	life, end := context.WithCancel(context.Background())
	cfg.Context = life
	stop := context.AfterFunc(ctx, end)
	cli, err := clientv3.New(cfg)
	if !stop() { // ctx ended during New, and with it the client
		if cli != nil {
			_ = cli.Close()
		}
		return nil, fmt.Errorf("etcd client for %q: %w", shown, ctx.Err())
	}
	if err != nil {
		end()
		// A deadline here is the client's own (DialTimeout), not the
		// caller's: keep its text, not its identity, as dlock does for
		// every store timeout.
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			err = fmt.Errorf("no answer within %v: %s", cfg.DialTimeout, err)
		}
		return nil, fmt.Errorf("%w: etcd client for %q: %w", dlock.ErrBackend, shown, err)
	}
	return cli, nil
}

// ParseEndpoints makes an etcd client configuration from
//
//	host:2379,host2:2379                    plain endpoints, as etcdctl --endpoints takes them
//	http://host:2379,http://host2:2379      the same, with schemes (https:// uses TLS, system roots)
//	etcd://[user[:password]@]host:2379,host2:2379
//	etcds://[user[:password]@]host:2379,... TLS, system roots
//
// each optionally followed by parameters, ?name=value&..., values escaped
// as in a URL query:
//
//	ca_file=PATH               PEM certificates of the authorities to trust instead of the system's
//	cert_file=PATH             a PEM client certificate (etcd --client-cert-auth) ...
//	key_file=PATH              ... and its key: both or neither
//	insecure_skip_verify=true  accept any server certificate (tests only)
//	password_file=PATH         the user's password, read from PATH (a trailing newline dropped),
//	                           so that it is not on a command line; it replaces any in the spec
//
// Any of the first three means TLS, whatever the scheme. The user
// information ends at the last '@' before the host list, so an '@' in the
// password need not be escaped; '%' must be (%25). Errors match
// driver.ErrInvalid (dlock.ErrInvalidArgument) and show the spec with its
// password masked (RedactEndpoints); an unknown parameter is an error.
//
// The configuration does not block on dialling (see Open). Its
// DialTimeout, DefaultRequestTimeout, bounds only the authentication of a
// user, which clientv3.New does before it returns. Its DialOptions make a
// call fail at once when gRPC could connect to none of the endpoints,
// with an error naming them and the last attempt's cause (a refused
// connection, a failed TLS handshake), where the etcd client would wait
// for a connection until the call's deadline; watches still wait. They
// also keep the client trying to connect about every second during an
// outage (gRPC's default waits up to two minutes between attempts). Add
// options to DialOptions rather than replace them.
func ParseEndpoints(s string) (clientv3.Config, error) {
	s = strings.TrimSpace(s)
	p := splitSpec(s)
	invalid := func(why string) (clientv3.Config, error) {
		return clientv3.Config{}, fmt.Errorf("%w: etcd endpoints %q: %s", driver.ErrInvalid, p.shown, why)
	}
	// quote shows a piece of the spec in a message, unless a piece of the
	// password could be in it.
	quote := func(piece string) string {
		if !p.exact {
			return ""
		}
		return fmt.Sprintf(" %q", piece)
	}
	if s == "" {
		return invalid("empty")
	}
	cfg := clientv3.Config{
		DialTimeout:          DefaultRequestTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		Logger:               zap.NewNop(), // dlock reports what matters through slog
	}
	params, err := parseParams(p.query, quote)
	if err != nil {
		return invalid(err.Error())
	}
	if err := p.credentials(&cfg, params, quote); err != nil {
		return invalid(err.Error())
	}
	useTLS, err := p.endpoints(&cfg, quote)
	if err != nil {
		return invalid(err.Error())
	}
	if useTLS || params.tls {
		if cfg.TLS, err = params.tlsConfig(quote); err != nil {
			return invalid(err.Error())
		}
	}
	cfg.DialOptions = failFastDialOptions(strings.Join(cfg.Endpoints, ","))
	return cfg, nil
}

// credentials sets cfg's user name and password from the user
// information and password_file.
func (p specParts) credentials(cfg *clientv3.Config, params specParams, quote func(string) string) error {
	if !p.hasUser && strings.Contains(p.hosts, "@") {
		return errors.New("user information goes in etcd://user:password@host:port,... or etcds://..." +
			" (with special characters of the password percent-encoded)")
	}
	if p.hasUser {
		user, password, err := parseUserinfo(p.userinfo)
		if err != nil {
			return err
		}
		if user == "" {
			return errors.New("a password without a user name")
		}
		cfg.Username, cfg.Password = user, password
	}
	if params.passwordFile != "" {
		if cfg.Username == "" {
			return fmt.Errorf("%s needs a user name: etcd://USER@host:port,...?%s=PATH", paramPasswordFile, paramPasswordFile)
		}
		password, err := readPasswordFile(params.passwordFile, quote)
		if err != nil {
			return err
		}
		cfg.Password = password
	}
	return nil
}

// endpoints sets cfg.Endpoints from the host list, and reports whether
// the schemes ask for TLS.
func (p specParts) endpoints(cfg *clientv3.Config, quote func(string) string) (useTLS bool, err error) {
	hosts := p.hosts
	if p.prefix != "" {
		useTLS = p.prefix == "etcds://"
		hosts = strings.TrimSuffix(hosts, "/")
	}
	for ep := range strings.SplitSeq(hosts, ",") {
		ep = strings.TrimSpace(ep)
		hostport := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok && p.prefix == "" {
			switch scheme {
			case "http":
			case "https":
				useTLS = true
			default:
				return false, fmt.Errorf("scheme%s (want http, https, etcd or etcds)", quote(scheme))
			}
			hostport = strings.TrimSuffix(rest, "/")
		}
		if !wellFormedHostPort(hostport) {
			return false, fmt.Errorf("endpoint%s is not host:port (an IP address or a DNS name, and a port from 1 to 65535)", quote(ep))
		}
		cfg.Endpoints = append(cfg.Endpoints, hostport)
	}
	return useTLS, nil
}

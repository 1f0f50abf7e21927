// Package redisconn turns the dlock CLI's --redis URL into a go-redis
// client. Besides go-redis's own redis:// and rediss:// forms it accepts
// Sentinel and Cluster URLs, which go-redis has no single-string form for.
package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is used when neither --redis nor EnvVar is set.
const DefaultURL = "redis://127.0.0.1:6379/0"

// EnvVar names the environment variable that supplies the default URL.
const EnvVar = "DLOCK_REDIS"

// ErrBadURL is matched by every error Parse returns.
var ErrBadURL = errors.New("invalid redis URL")

// Mode is the kind of deployment a URL points at.
type Mode int

// Modes, one per URL scheme family.
const (
	Standalone Mode = iota + 1
	Sentinel
	Cluster
)

// String names the mode for messages.
func (m Mode) String() string {
	switch m {
	case Standalone:
		return "standalone"
	case Sentinel:
		return "sentinel"
	case Cluster:
		return "cluster"
	}
	return "unknown"
}

// Target is a parsed URL from which any number of independent clients can
// be made (the demo gives every simulated instance its own).
type Target struct {
	mode     Mode
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	display  string
}

// Mode reports which kind of deployment the URL names.
func (t *Target) Mode() Mode { return t.mode }

// String returns the URL with any password masked, for messages.
func (t *Target) String() string { return t.display }

// Parse accepts:
//
//	redis://[[user]:password@]host[:port][/db][?options]     (unix:// too)
//	rediss://...                                             (TLS)
//	redis+sentinel://[[user]:password@]host1:port1,host2:port2/mastername[/db][?options]
//	redis+cluster://[[user]:password@]host1:port1,host2:port2[?options]
//
// rediss+sentinel and rediss+cluster use TLS. Options are go-redis's
// snake_case option names (dial_timeout=2s, ...); Sentinel URLs also take
// sentinel_username and sentinel_password, for Sentinels that require their
// own credentials (the userinfo part authenticates to the master).
func Parse(raw string) (*Target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, fmt.Errorf("%w %q: missing scheme (want redis://, rediss://, redis+sentinel:// or redis+cluster://)", ErrBadURL, raw)
	}
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	if base != "redis" && base != "rediss" && base != "unix" || base == "unix" && kind != "" {
		return nil, fmt.Errorf("%w %q: unsupported scheme %q", ErrBadURL, mask(raw), scheme)
	}
	var t *Target
	var err error
	switch kind {
	case "":
		t, err = parseStandalone(raw)
	case "sentinel":
		t, err = parseSentinel(base, rest)
	case "cluster":
		t, err = parseCluster(base, rest)
	default:
		return nil, fmt.Errorf("%w %q: unsupported scheme %q", ErrBadURL, mask(raw), scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadURL, mask(raw), err)
	}
	t.display = mask(raw)
	return t, nil
}

func parseStandalone(raw string) (*Target, error) {
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	return &Target{mode: Standalone, single: o}, nil
}

// authority splits "userinfo@h1,h2/path?query" into its parts.
type authority struct {
	userinfo string // with the trailing '@', or empty
	hosts    []string
	path     string // without the leading '/'
	query    url.Values
}

func splitAuthority(rest string, defaultPort int) (authority, error) {
	var a authority
	rest, rawQuery, _ := strings.Cut(rest, "?")
	rest, _, _ = strings.Cut(rest, "#")
	hostPart, path, _ := strings.Cut(rest, "/")
	a.path = strings.TrimSuffix(path, "/")
	if i := strings.LastIndexByte(hostPart, '@'); i >= 0 {
		a.userinfo, hostPart = hostPart[:i+1], hostPart[i+1:]
	}
	for h := range strings.SplitSeq(hostPart, ",") {
		if h == "" {
			return a, errors.New("empty host in list")
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(defaultPort))
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return a, fmt.Errorf("bad host %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return a, fmt.Errorf("bad port in %q", h)
		}
		a.hosts = append(a.hosts, h)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return a, err
	}
	a.query = q
	return a, nil
}

func parseSentinel(base, rest string) (*Target, error) {
	a, err := splitAuthority(rest, 26379)
	if err != nil {
		return nil, err
	}
	master, db, _ := strings.Cut(a.path, "/")
	if master == "" {
		return nil, errors.New("missing master name (redis+sentinel://host:port,.../mastername[/db])")
	}
	if db == "" {
		db = "0"
	}
	sentUser, sentPass := a.query.Get("sentinel_username"), a.query.Get("sentinel_password")
	a.query.Del("sentinel_username")
	a.query.Del("sentinel_password")
	// Let go-redis parse credentials, db, TLS and tuning options against
	// the first address, then carry them over to failover options.
	o, err := redis.ParseURL(base + "://" + a.userinfo + a.hosts[0] + "/" + db + "?" + a.query.Encode())
	if err != nil {
		return nil, err
	}
	fo := &redis.FailoverOptions{
		MasterName:            master,
		SentinelAddrs:         a.hosts,
		SentinelUsername:      sentUser,
		SentinelPassword:      sentPass,
		Username:              o.Username,
		Password:              o.Password,
		DB:                    o.DB,
		Protocol:              o.Protocol,
		ClientName:            o.ClientName,
		MaxRetries:            o.MaxRetries,
		MinRetryBackoff:       o.MinRetryBackoff,
		MaxRetryBackoff:       o.MaxRetryBackoff,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: true,
		PoolSize:              o.PoolSize,
		PoolTimeout:           o.PoolTimeout,
		MinIdleConns:          o.MinIdleConns,
		MaxIdleConns:          o.MaxIdleConns,
		ConnMaxIdleTime:       o.ConnMaxIdleTime,
		ConnMaxLifetime:       o.ConnMaxLifetime,
		TLSConfig:             o.TLSConfig,
		DisableIdentity:       o.DisableIdentity,
	}
	return &Target{mode: Sentinel, failover: fo}, nil
}

func parseCluster(base, rest string) (*Target, error) {
	a, err := splitAuthority(rest, 6379)
	if err != nil {
		return nil, err
	}
	if a.path != "" && a.path != "0" {
		return nil, errors.New("a cluster has only database 0")
	}
	for _, h := range a.hosts[1:] {
		a.query.Add("addr", h)
	}
	co, err := redis.ParseClusterURL(base + "://" + a.userinfo + a.hosts[0] + "?" + a.query.Encode())
	if err != nil {
		return nil, err
	}
	co.ContextTimeoutEnabled = true
	return &Target{mode: Cluster, cluster: co}, nil
}

// mask hides the password in a URL's userinfo.
func mask(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// NewClient returns a new client with its own connection pool. The caller
// closes the client.
func (t *Target) NewClient() redis.UniversalClient {
	switch t.mode {
	case Sentinel:
		o := *t.failover
		o.SentinelAddrs = append([]string(nil), o.SentinelAddrs...)
		return redis.NewFailoverClient(&o)
	case Cluster:
		o := *t.cluster
		o.Addrs = append([]string(nil), o.Addrs...)
		return redis.NewClusterClient(&o)
	default:
		o := *t.single // go-redis fills in defaults in place: never share
		return redis.NewClient(&o)
	}
}

package redisdriver

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlockio/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// dialerRetries is how many times a client made by ParseURL dials before
// a command fails: once. go-redis defaults to 5 attempts 100 ms apart, and
// retries the command itself too, so a refused connection surfaced only
// after 1.7–3.4 s; dlock's waiters and watchdog have their own retries and
// need to hear of the failure.
const dialerRetries = 1

// ParseURL returns a new go-redis client for rawURL, which is one of
//
//	redis://[[user]:password@]host[:port][/db][?options]      (unix:// too)
//	rediss://...                                              (TLS)
//	redis+sentinel://[[user]:password@]host1[:port1],host2.../mastername[/db][?options]
//	redis+cluster://[[user]:password@]host1[:port1],host2...[?options]
//
// rediss+sentinel and rediss+cluster use TLS. Options are go-redis's
// snake_case option names (dial_timeout=2s, ...); Sentinel URLs also take
// sentinel_username and sentinel_password, for Sentinels that require
// credentials of their own (the userinfo authenticates to the master).
//
// The client honours context deadlines (ContextTimeoutEnabled) and dials
// once per attempt, so a refused connection fails a call in about a tenth
// of a second (go-redis still retries the command a few times; a Sentinel
// deployment, which asks each Sentinel in turn, in under a second) rather
// than seconds. Errors match driver.ErrInvalid and do not show the
// password. The caller closes the client (Open makes a driver that does).
func ParseURL(rawURL string) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: redis URL %q: missing scheme (want redis://, rediss://, redis+sentinel:// or redis+cluster://)",
			driver.ErrInvalid, RedactURL(rawURL))
	}
	base, kind, _ := strings.Cut(strings.ToLower(scheme), "+")
	var c redis.UniversalClient
	var err error
	switch {
	case (base == "redis" || base == "rediss" || base == "unix") && kind == "":
		c, err = standaloneClient(rawURL)
	case (base == "redis" || base == "rediss") && kind == "sentinel":
		c, err = sentinelClient(base, rest)
	case (base == "redis" || base == "rediss") && kind == "cluster":
		c, err = clusterClient(base, rest)
	default:
		err = fmt.Errorf("unsupported scheme %q", scheme)
	}
	if err != nil {
		if strings.Contains(rest, "@") {
			// Parse errors quote pieces of the URL (url.Parse quotes all
			// of it; a bad port is often part of a password with an
			// unescaped '/', '?' or '#'): say what to check instead.
			err = errors.New("malformed (check hosts and ports, and percent-encode special characters in the password)")
		}
		return nil, fmt.Errorf("%w: redis URL %q: %v", driver.ErrInvalid, RedactURL(rawURL), err)
	}
	return c, nil
}

func standaloneClient(rawURL string) (redis.UniversalClient, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o.Network != "unix" {
		if err := checkHostPort(o.Addr); err != nil {
			return nil, err
		}
	}
	o.ContextTimeoutEnabled = true
	o.DialerRetries = dialerRetries
	return redis.NewClient(o), nil
}

// checkHostPort refuses an address whose port is not 1 to 65535: go-redis
// would only find out when dialling, as if the server were down.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// hostList is "userinfo@h1,h2/path?query" taken apart.
type hostList struct {
	userinfo string // with its trailing '@', or empty
	hosts    []string
	path     string // without the leading '/'
	query    url.Values
}

func parseHostList(rest string, defaultPort int) (hostList, error) {
	var l hostList
	rest, rawQuery, _ := strings.Cut(rest, "?")
	rest, _, _ = strings.Cut(rest, "#")
	hostPart, path, _ := strings.Cut(rest, "/")
	l.path = strings.TrimSuffix(path, "/")
	// The last '@': a password may contain one.
	if i := strings.LastIndexByte(hostPart, '@'); i >= 0 {
		l.userinfo, hostPart = hostPart[:i+1], hostPart[i+1:]
	}
	for h := range strings.SplitSeq(hostPart, ",") {
		if h == "" {
			return l, errors.New("empty host in list")
		}
		if _, _, err := net.SplitHostPort(h); err != nil { // no port given
			h = net.JoinHostPort(strings.Trim(h, "[]"), strconv.Itoa(defaultPort))
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return l, fmt.Errorf("bad host %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return l, fmt.Errorf("bad port in %q", h)
		}
		l.hosts = append(l.hosts, h)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return l, err
	}
	l.query = q
	return l, nil
}

func sentinelClient(base, rest string) (redis.UniversalClient, error) {
	l, err := parseHostList(rest, 26379)
	if err != nil {
		return nil, err
	}
	master, db, _ := strings.Cut(l.path, "/")
	if master == "" {
		return nil, errors.New("missing master name (redis+sentinel://host:port,.../mastername[/db])")
	}
	if db == "" {
		db = "0"
	}
	sentinelUser, sentinelPass := l.query.Get("sentinel_username"), l.query.Get("sentinel_password")
	l.query.Del("sentinel_username")
	l.query.Del("sentinel_password")
	// go-redis parses credentials, db, TLS and tuning options of a plain
	// URL; reuse that against the first address and carry them over.
	o, err := redis.ParseURL(base + "://" + l.userinfo + l.hosts[0] + "/" + db + "?" + l.query.Encode())
	if err != nil {
		return nil, err
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            master,
		SentinelAddrs:         l.hosts,
		SentinelUsername:      sentinelUser,
		SentinelPassword:      sentinelPass,
		Username:              o.Username,
		Password:              o.Password,
		DB:                    o.DB,
		Protocol:              o.Protocol,
		ClientName:            o.ClientName,
		MaxRetries:            o.MaxRetries,
		MinRetryBackoff:       o.MinRetryBackoff,
		MaxRetryBackoff:       o.MaxRetryBackoff,
		DialTimeout:           o.DialTimeout,
		DialerRetries:         dialerRetries,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		ContextTimeoutEnabled: true,
		PoolFIFO:              o.PoolFIFO,
		PoolSize:              o.PoolSize,
		PoolTimeout:           o.PoolTimeout,
		MinIdleConns:          o.MinIdleConns,
		MaxIdleConns:          o.MaxIdleConns,
		MaxActiveConns:        o.MaxActiveConns,
		ConnMaxIdleTime:       o.ConnMaxIdleTime,
		ConnMaxLifetime:       o.ConnMaxLifetime,
		TLSConfig:             o.TLSConfig,
		DisableIdentity:       o.DisableIdentity,
	}), nil
}

func clusterClient(base, rest string) (redis.UniversalClient, error) {
	l, err := parseHostList(rest, 6379)
	if err != nil {
		return nil, err
	}
	if l.path != "" && l.path != "0" {
		return nil, errors.New("a cluster has only database 0")
	}
	for _, h := range l.hosts[1:] {
		l.query.Add("addr", h)
	}
	o, err := redis.ParseClusterURL(base + "://" + l.userinfo + l.hosts[0] + "?" + l.query.Encode())
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	if o.DialerRetries == 0 { // not set in the URL (dialer_retries)
		o.DialerRetries = dialerRetries
	}
	return redis.NewClusterClient(o), nil
}

// RedactURL returns rawURL with the password in its userinfo replaced by
// "xxxxx", for messages and reports.
func RedactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	// The userinfo ends at the last '@' before the query or fragment that
	// follows the first '@': a password with an unescaped '/', '?', '#' or
	// '@' is still masked whole, and an '@' in the query is left alone.
	first := strings.IndexByte(rest, '@')
	if first < 0 {
		return raw
	}
	end := len(rest)
	if q := strings.IndexAny(rest[first:], "?#"); q >= 0 {
		end = first + q
	}
	at := strings.LastIndexByte(rest[:end], '@')
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

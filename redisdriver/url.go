package redisdriver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
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
// ParseURL reads these options itself, with the same names as
// etcddriver.ParseEndpoints:
//
//	password_file=FILE          the password, read from FILE (one trailing
//	                            newline dropped); it replaces the userinfo's
//	ca_file=FILE                PEM certificates to verify the servers with,
//	                            instead of the system's roots
//	cert_file=FILE&key_file=FILE  the client certificate and its key, for
//	                            servers that require one (tls-auth-clients)
//	insecure_skip_verify=true   do not verify the servers' certificates
//
// The last four need a TLS scheme, and cert_file and key_file go together.
// go-redis's skip_verify is refused: insecure_skip_verify says what it does.
// With several hosts (Sentinel, Cluster) each server is verified under its
// own address, not the first host's name.
//
// The client honours context deadlines (ContextTimeoutEnabled) and dials
// once per attempt, so a refused connection fails a call in about a tenth
// of a second (go-redis still retries the command a few times; a Sentinel
// deployment, which asks each Sentinel in turn, in under a second) rather
// than seconds. Errors, a file that cannot be read or holds no usable
// certificate or key included, match driver.ErrInvalid and show no
// password (see RedactURL). A database number the server does not have
// (redis://host/99) is found by the first call, which fails, as every
// call does, with the server's answer wrapped in an error that matches
// driver.ErrInvalid: a mistake in the URL, not a store failure to retry.
// The caller closes the client (Open makes a driver that does).
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
		var pe paramError
		var ue *url.Error
		switch {
		case errors.As(err, &pe):
			// Names options and files only: said as it is.
		case strings.Contains(rest, "@"):
			// Parse errors quote pieces of the URL (url.Parse quotes all
			// of it; a bad port is often part of a password with an
			// unescaped '/', '?' or '#'): say what to check instead.
			err = errors.New("malformed (check hosts and ports, and percent-encode special characters in the password)")
		case errors.As(err, &ue):
			ue.URL = RedactURL(ue.URL) // its query may hold a sentinel_password
		}
		return nil, fmt.Errorf("%w: redis URL %q: %v", driver.ErrInvalid, RedactURL(rawURL), err)
	}
	return c, nil
}

// The options ParseURL reads itself rather than go-redis. The etcd driver
// takes the same names, so that one spelling serves either store (the CLI
// appends them to the store's address).
const (
	paramPasswordFile = "password_file"
	paramCAFile       = "ca_file"
	paramCertFile     = "cert_file"
	paramKeyFile      = "key_file"
	paramInsecure     = "insecure_skip_verify"
	// paramSkipVerify is go-redis's name for insecure_skip_verify,
	// refused: turning verification off must say so.
	paramSkipVerify = "skip_verify"
)

// urlParams are ParseURL's own options, with the files they name read.
type urlParams struct {
	password    string // from password_file, when hasPassword
	hasPassword bool
	rootCAs     *x509.CertPool // from ca_file; nil: the system's roots
	certs       []tls.Certificate
	insecure    bool
}

// paramError is a refused option of ParseURL's own. Its text names
// options and file paths only, never a piece of the userinfo, so ParseURL
// shows it even when the URL has a password.
type paramError struct{ msg string }

func (e paramError) Error() string { return e.msg }

func paramErrorf(format string, a ...any) error { return paramError{fmt.Sprintf(format, a...)} }

// takeParams removes ParseURL's own options from q and reads the files
// they name. tlsURL is whether the scheme uses TLS; the TLS options are
// refused without it, as they would otherwise be ignored. As go-redis
// does, the last of repeated values counts.
func takeParams(q url.Values, tlsURL bool) (urlParams, error) {
	var p urlParams
	if q.Has(paramSkipVerify) {
		return p, paramErrorf("%s is not supported: %s=true turns certificate verification off", paramSkipVerify, paramInsecure)
	}
	take := func(name string) (string, bool) {
		vs := q[name]
		q.Del(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[len(vs)-1], true
	}
	pwFile, hasPW := take(paramPasswordFile)
	ca, hasCA := take(paramCAFile)
	cert, hasCert := take(paramCertFile)
	key, hasKey := take(paramKeyFile)
	insecure, hasInsecure := take(paramInsecure)
	for i, given := range []bool{hasCA, hasCert, hasKey, hasInsecure} {
		if given && !tlsURL {
			name := []string{paramCAFile, paramCertFile, paramKeyFile, paramInsecure}[i]
			return p, paramErrorf("%s needs a TLS URL (rediss://, rediss+sentinel:// or rediss+cluster://)", name)
		}
	}
	var err error
	if hasPW {
		if p.password, err = readPasswordFile(pwFile); err != nil {
			return p, err
		}
		p.hasPassword = true
	}
	if hasCA {
		if p.rootCAs, err = readCAFile(ca); err != nil {
			return p, err
		}
	}
	switch {
	case hasCert != hasKey:
		return p, paramErrorf("%s and %s go together: the client certificate and its private key", paramCertFile, paramKeyFile)
	case hasCert:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return p, paramErrorf("%s %q, %s %q: %v", paramCertFile, cert, paramKeyFile, key, err)
		}
		p.certs = []tls.Certificate{pair}
	}
	switch insecure {
	case "true", "1":
		p.insecure = true
	case "false", "0", "":
	default:
		return p, paramErrorf("%s=%q: want true or false", paramInsecure, insecure)
	}
	return p, nil
}

// readPasswordFile returns the password in path: the whole file but for
// one trailing newline (LF or CRLF), as echo and editors leave one.
func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", paramErrorf("%s: %v", paramPasswordFile, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", paramErrorf("%s %q is empty", paramPasswordFile, path)
	}
	return pw, nil
}

func readCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, paramErrorf("%s: %v", paramCAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, paramErrorf("%s %q: no PEM certificate in it", paramCAFile, path)
	}
	return pool, nil
}

// apply sets the password and the TLS configuration c (nil without TLS)
// from p.
func (p urlParams) apply(password *string, c *tls.Config) {
	if p.hasPassword {
		*password = p.password
	}
	if c == nil {
		return
	}
	if p.rootCAs != nil {
		c.RootCAs = p.rootCAs
	}
	c.Certificates = p.certs
	c.InsecureSkipVerify = p.insecure
}

func standaloneClient(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	p, err := takeParams(q, u.Scheme == "rediss")
	if err != nil {
		return nil, err
	}
	u.RawQuery = q.Encode()
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, err
	}
	p.apply(&o.Password, o.TLSConfig)
	if o.Network != "unix" {
		if err := checkHostPort(o.Addr); err != nil {
			return nil, err
		}
	}
	o.ContextTimeoutEnabled = true
	o.DialerRetries = dialerRetries
	c := redis.NewClient(o)
	addMissingDBHook(c, rawURL, o.DB)
	return c, nil
}

// addMissingDBHook makes c report the server's refusal of the URL's
// database number, which every new connection selects, as what it is: a
// mistake in the URL (driver.ErrInvalid, an invalid argument to dlock)
// rather than a failing store that a retry could fix. Database 0 always
// exists.
func addMissingDBHook(c *redis.Client, rawURL string, db int) {
	if db != 0 {
		c.AddHook(missingDBHook{url: RedactURL(rawURL), db: db})
	}
}

// missingDBHook is addMissingDBHook's hook: it rewrites the error of every
// command and pipeline the refusal failed, and leaves the rest alone.
type missingDBHook struct {
	url string // redacted
	db  int
}

func (h missingDBHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h missingDBHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.refused(err) {
			err = h.wrap(err)
			cmd.SetErr(err)
		}
		return err
	}
}

func (h missingDBHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if h.refused(cmd.Err()) {
				cmd.SetErr(h.wrap(cmd.Err()))
			}
		}
		if h.refused(err) {
			err = h.wrap(err)
		}
		return err
	}
}

func (h missingDBHook) refused(err error) bool {
	return err != nil && !errors.Is(err, driver.ErrInvalid) && strings.Contains(err.Error(), "DB index is out of range")
}

func (h missingDBHook) wrap(err error) error {
	return fmt.Errorf("%w: redis URL %q: the server has no database %d (%w)", driver.ErrInvalid, h.url, h.db, err)
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
	p, err := takeParams(l.query, base == "rediss")
	if err != nil {
		return nil, err
	}
	// go-redis parses credentials, db, TLS and tuning options of a plain
	// URL; reuse that against the first address and carry them over.
	o, err := redis.ParseURL(base + "://" + l.userinfo + l.hosts[0] + "/" + db + "?" + l.query.Encode())
	if err != nil {
		return nil, err
	}
	p.apply(&o.Password, o.TLSConfig)
	perHostName(o.TLSConfig)
	c := redis.NewFailoverClient(&redis.FailoverOptions{
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
	})
	addMissingDBHook(c, base+"+sentinel://"+rest, o.DB)
	return c, nil
}

func clusterClient(base, rest string) (redis.UniversalClient, error) {
	l, err := parseHostList(rest, 6379)
	if err != nil {
		return nil, err
	}
	if l.path != "" && l.path != "0" {
		return nil, errors.New("a cluster has only database 0")
	}
	p, err := takeParams(l.query, base == "rediss")
	if err != nil {
		return nil, err
	}
	for _, h := range l.hosts[1:] {
		l.query.Add("addr", h)
	}
	o, err := redis.ParseClusterURL(base + "://" + l.userinfo + l.hosts[0] + "?" + l.query.Encode())
	if err != nil {
		return nil, err
	}
	if o.TLSConfig != nil {
		o.TLSConfig.MinVersion = tls.VersionTLS12 // as go-redis sets for the other forms
	}
	p.apply(&o.Password, o.TLSConfig)
	perHostName(o.TLSConfig)
	o.ContextTimeoutEnabled = true
	if o.DialerRetries == 0 { // not set in the URL (dialer_retries)
		o.DialerRetries = dialerRetries
	}
	return redis.NewClusterClient(o), nil
}

// perHostName makes a client of several servers verify each under its own
// address: go-redis names the first host in ServerName, and a Sentinel's
// master or another Cluster node then failed verification against the
// certificate of its own name.
func perHostName(c *tls.Config) {
	if c != nil {
		c.ServerName = "" // crypto/tls takes it from the address dialled
	}
}

// RedactURL returns raw with its secrets replaced by "xxxxx", for messages
// and reports: the password in its userinfo, also when raw has no scheme
// (u:pw@host), and the values of query parameters whose names end in
// "password" (sentinel_password). Everything else is kept as it is.
func RedactURL(raw string) string {
	prefix, rest := "", raw
	if scheme, r, ok := strings.Cut(raw, "://"); ok {
		prefix, rest = scheme+"://", r
	}
	return prefix + redactQuery(redactUserinfo(rest))
}

// redactUserinfo masks the password of "userinfo@hosts...".
func redactUserinfo(rest string) string {
	// The userinfo ends at the last '@' before the query or fragment that
	// follows the first '@': a password with an unescaped '/', '?', '#' or
	// '@' is still masked whole, and an '@' in the query is left alone.
	first := strings.IndexByte(rest, '@')
	if first < 0 {
		return rest
	}
	end := len(rest)
	if q := strings.IndexAny(rest[first:], "?#"); q >= 0 {
		end = first + q
	}
	at := strings.LastIndexByte(rest[:end], '@')
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return rest
	}
	return user + ":xxxxx" + rest[at:]
}

// redactQuery masks the values of the *password parameters of the query
// in rest (whose userinfo is already masked, so its first '?' starts the
// query).
func redactQuery(rest string) string {
	start := strings.IndexByte(rest, '?')
	if start < 0 {
		return rest
	}
	query, frag, hasFrag := strings.Cut(rest[start+1:], "#")
	pairs := strings.Split(query, "&")
	for i, kv := range pairs {
		k, _, hasValue := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if hasValue && strings.HasSuffix(strings.ToLower(name), "password") {
			pairs[i] = k + "=xxxxx"
		}
	}
	out := rest[:start+1] + strings.Join(pairs, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

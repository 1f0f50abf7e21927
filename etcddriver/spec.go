package etcddriver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// The parameters an endpoint spec takes in its query string, after the
// last endpoint.
const (
	paramCAFile       = "ca_file"              // PEM file of the authorities to trust instead of the system's
	paramCertFile     = "cert_file"            // PEM client certificate, with key_file
	paramKeyFile      = "key_file"             // PEM key of cert_file
	paramSkipVerify   = "insecure_skip_verify" // true: accept any server certificate
	paramPasswordFile = "password_file"        // the password, read from a file
)

// redacted stands for a password in messages.
const redacted = "xxxxx"

// maxPasswordFile bounds what a password_file may hold, so that a wrong
// path (a device, a log) is an error rather than a read of the whole thing.
const maxPasswordFile = 4096

// RedactEndpoints returns the endpoint spec s (see ParseEndpoints) with the
// password in its user information replaced by "xxxxx", for messages and
// logs. When it cannot tell where the password ends (an unescaped '@'
// after it, a spec without the etcd:// scheme), it masks everything up to
// the last '@'.
func RedactEndpoints(s string) string { return splitSpec(s).shown }

// specParts is an endpoint spec cut at its user information and query.
type specParts struct {
	prefix   string // "etcd://" or "etcds://" before the user information, or ""
	userinfo string
	hasUser  bool
	hosts    string // the endpoints, comma-separated
	query    string
	shown    string // the spec with the password masked
	// exact: shown masks exactly the user information's password, so
	// every other piece of the spec may be quoted in messages. When not,
	// a piece of the password may be anywhere before the last '@'.
	exact bool
}

// splitSpec cuts s. Only etcd:// and etcds:// specs carry user
// information; it ends at the last '@' before the host list (see
// userinfoEnd), so an unescaped '@' belongs to the password.
func splitSpec(s string) specParts {
	var p specParts
	body := s
	if scheme, rest, ok := strings.Cut(s, "://"); ok && (scheme == "etcd" || scheme == "etcds") {
		p.prefix, body = scheme+"://", rest
		if at := userinfoEnd(body); at >= 0 {
			p.userinfo, p.hasUser, body = body[:at], true, body[at+1:]
		}
	}
	p.hosts, p.query, _ = strings.Cut(body, "?")
	last := strings.LastIndexByte(s, '@')
	switch {
	case last < 0:
		p.shown, p.exact = s, true
	case p.hasUser && len(p.prefix)+len(p.userinfo) == last:
		p.shown, p.exact = p.prefix+maskUserinfo(p.userinfo)+s[last:], true
	default:
		p.shown = maskUpTo(s, last)
	}
	return p
}

// userinfoEnd returns the index of the '@' that ends the user information
// of an etcd:// spec's body, or -1. The host list holds no '@', so that is
// the body's last '@', unless a parameter value (a file path) holds one
// too: then it is the last '@' followed by a well-formed host list, or
// none when the body starts with one. Failing those it is the last '@',
// and parsing reports the hosts.
func userinfoEnd(body string) int {
	last := strings.LastIndexByte(body, '@')
	for at := last; at >= 0; at = strings.LastIndexByte(body[:at], '@') {
		hosts, _, _ := strings.Cut(body[at+1:], "?")
		if wellFormedHosts(hosts) {
			return at
		}
	}
	if hosts, _, _ := strings.Cut(body, "?"); wellFormedHosts(hosts) {
		return -1
	}
	return last
}

// wellFormedHosts reports whether hosts is a comma-separated list of
// host:port, with an optional '/' at its end.
func wellFormedHosts(hosts string) bool {
	for h := range strings.SplitSeq(strings.TrimSuffix(hosts, "/"), ",") {
		if !wellFormedHostPort(strings.TrimSpace(h)) {
			return false
		}
	}
	return true
}

// wellFormedHostPort reports whether hp is host:port with a port from 1
// to 65535 and a host that can be dialled: an IP address (in brackets for
// IPv6, a zone allowed) or a DNS name. Another host (with a space, a '$',
// a control byte) would fail only when dialled, on every call, as "no such
// host".
func wellFormedHostPort(hp string) bool {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return !strings.HasPrefix(hp, "[") && dnsName(host)
}

// dnsName reports whether host is a DNS name: dot-separated labels of
// ASCII letters, digits, '-' (not first or last) and '_' (which some
// internal names use), 1 to 63 bytes each, 253 in all, with an optional
// trailing dot. The last label is not all digits: that is an IP address
// gone wrong (999.0.0.1), not a name.
func dnsName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return false
	}
	numeric := false
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		numeric = true
		for i := 0; i < len(label); i++ {
			c := label[i]
			isDigit := '0' <= c && c <= '9'
			if !isDigit && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
				return false
			}
			numeric = numeric && isDigit
		}
	}
	return !numeric
}

// maskUserinfo returns user:xxxxx for user:password, userinfo unchanged
// when it has no password.
func maskUserinfo(userinfo string) string {
	user, _, hasPass := strings.Cut(userinfo, ":")
	if !hasPass {
		return userinfo
	}
	return user + ":" + redacted
}

// maskUpTo masks everything of s between its scheme (when it starts with
// one) and the '@' at index at, keeping a user name before a ':'. It is the
// fallback when the password's end is unknown: it may hide more than the
// password, never less.
func maskUpTo(s string, at int) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 && i < at && isSchemeName(s[:i]) {
		start = i + len("://")
	}
	user, _, hasPass := strings.Cut(s[start:at], ":")
	if !hasPass {
		return s[:start] + redacted + s[at:]
	}
	return s[:start] + user + ":" + redacted + s[at:]
}

// isSchemeName reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.'.
func isSchemeName(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// parseUserinfo decodes user[:password], percent-escapes included.
func parseUserinfo(userinfo string) (user, password string, err error) {
	rawUser, rawPass, _ := strings.Cut(userinfo, ":")
	if user, err = url.PathUnescape(rawUser); err != nil {
		return "", "", errors.New("bad percent-escape in the user name")
	}
	if password, err = url.PathUnescape(rawPass); err != nil {
		// url's error quotes the escape, which is part of the password.
		return "", "", errors.New("bad percent-escape in the password (a '%' in it is written %25)")
	}
	return user, password, nil
}

// specParams are the parameters of a spec's query string.
type specParams struct {
	caFile, certFile, keyFile, passwordFile string
	skipVerify                              bool
	tls                                     bool // a TLS parameter was given: TLS on every endpoint
}

// parseParams reads query: name=value pairs separated by '&', values
// escaped as in a URL query (url.QueryEscape). quote renders a piece of
// the spec for a message, or hides it.
func parseParams(query string, quote func(string) string) (specParams, error) {
	var p specParams
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" {
			continue
		}
		name, raw, _ := strings.Cut(pair, "=")
		value, err := url.QueryUnescape(raw)
		if err != nil {
			return p, fmt.Errorf("parameter%s: bad percent-escape in its value", quote(name))
		}
		if seen[name] {
			return p, fmt.Errorf("parameter%s given twice", quote(name))
		}
		seen[name] = true
		var file *string
		switch name {
		case paramCAFile:
			file, p.tls = &p.caFile, true
		case paramCertFile:
			file, p.tls = &p.certFile, true
		case paramKeyFile:
			file, p.tls = &p.keyFile, true
		case paramPasswordFile:
			file = &p.passwordFile
		case paramSkipVerify:
			if p.skipVerify, err = strconv.ParseBool(value); err != nil {
				return p, fmt.Errorf("%s%s: want true or false", paramSkipVerify, quote(value))
			}
			p.tls = p.tls || p.skipVerify
		case "skip_verify":
			return p, fmt.Errorf("unknown parameter skip_verify: the name is %s (%s=true)", paramSkipVerify, paramSkipVerify)
		default:
			return p, fmt.Errorf("unknown parameter%s (want %s, %s, %s, %s or %s)", quote(name),
				paramCAFile, paramCertFile, paramKeyFile, paramSkipVerify, paramPasswordFile)
		}
		if file != nil {
			if value == "" {
				return p, fmt.Errorf("%s: empty path", name)
			}
			*file = value
		}
	}
	if (p.certFile == "") != (p.keyFile == "") {
		return p, fmt.Errorf("%s and %s go together: give both or neither", paramCertFile, paramKeyFile)
	}
	return p, nil
}

// tlsConfig loads the files p names. Its errors show the paths only
// through quote, and never the files' contents.
func (p specParams) tlsConfig(quote func(string) string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: p.skipVerify}
	if p.caFile != "" {
		pem, err := os.ReadFile(p.caFile)
		if err != nil {
			return nil, fileError(paramCAFile, p.caFile, err, quote)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fileError(paramCAFile, p.caFile, errors.New("no PEM certificate in it"), quote)
		}
	}
	if p.certFile != "" {
		certPEM, err := os.ReadFile(p.certFile)
		if err != nil {
			return nil, fileError(paramCertFile, p.certFile, err, quote)
		}
		keyPEM, err := os.ReadFile(p.keyFile)
		if err != nil {
			return nil, fileError(paramKeyFile, p.keyFile, err, quote)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %v", paramCertFile, paramKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// readPasswordFile returns the password in path, without its trailing
// newline.
func readPasswordFile(path string, quote func(string) string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fileError(paramPasswordFile, path, err, quote)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fileError(paramPasswordFile, path, err, quote)
	}
	if len(b) > maxPasswordFile {
		return "", fileError(paramPasswordFile, path, fmt.Errorf("longer than %d bytes, not a password", maxPasswordFile), quote)
	}
	password := strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return "", fileError(paramPasswordFile, path, errors.New("empty"), quote)
	}
	return password, nil
}

// fileError reports err about the file at path of parameter name. The
// path is shown only through quote: os errors carry it, so they give up
// their own text of it.
func fileError(name, path string, err error, quote func(string) string) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err
	}
	return fmt.Errorf("%s%s: %v", name, quote(path), err)
}

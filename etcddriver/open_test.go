package etcddriver

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/driver"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
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
		{in: "[fe80::1%eth0]:2379,h_1.example.:2379", endpoints: []string{"[fe80::1%eth0]:2379", "h_1.example.:2379"}},
	} {
		cfg, err := ParseEndpoints(c.in)
		if err != nil {
			t.Errorf("ParseEndpoints(%q): %v", c.in, err)
			continue
		}
		if !slices.Equal(cfg.Endpoints, c.endpoints) || cfg.Username != c.user || cfg.Password != c.password || (cfg.TLS != nil) != c.tls {
			t.Errorf("ParseEndpoints(%q) = %v user %q password %q tls %v", c.in, cfg.Endpoints, cfg.Username, cfg.Password, cfg.TLS != nil)
		}
		if cfg.DialTimeout != DefaultRequestTimeout {
			t.Errorf("ParseEndpoints(%q): DialTimeout %v, want DefaultRequestTimeout to bound authentication", c.in, cfg.DialTimeout)
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

// An endpoint that cannot be dialled as written is ErrInvalidArgument at
// Open, naming it, rather than a client whose every call fails: a port
// that is not a number from 1 to 65535, a host that is neither an IP
// address nor a DNS name. Before, the hosts below were taken, and every
// call failed with "no such host".
func TestOpenRefusesUnparsableEndpoints(t *testing.T) {
	for _, bad := range []string{
		"127.0.0.1:notaport", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:2379:1", "127.0.0.1:2379/x",
		"host name:2379", "127.0.0.1 :2379", "ho$t:2379", "h\x00:2379", "-h:2379", "h-:2379", "h..x:2379",
		"999.0.0.1:2379", "[h]:2379", "\u00e4.example:2379", "http://h1:2379,ho$t:2379",
	} {
		bad, _ = strconv.Unquote(`"` + bad + `"`)
		c, err := Open(bad)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "not host:port") {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument, not host:port", bad, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}

// An unescaped '@', '/', '#' or '?' in the password belongs to it: the user
// information ends at the last '@' before the host list.
func TestParseEndpointsSpecialPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"etcd://u:p@ss@h1:2379":          "p@ss",
		"etcd://u:a/b#c@h1:2379,h2:2379": "a/b#c",
		"etcd://u:a?b@c@h1:2379":         "a?b@c",
		"etcd://u:p%25%40@h1:2379":       "p%@",
		"etcds://u:@x@h1:2379/":          "@x",
	} {
		cfg, err := ParseEndpoints(in)
		if err != nil {
			t.Errorf("ParseEndpoints(%q): %v", in, err)
			continue
		}
		if cfg.Username != "u" || cfg.Password != want || cfg.Endpoints[0] != "h1:2379" {
			t.Errorf("ParseEndpoints(%q): user %q password %q endpoints %v, want u, %q, h1:2379", in, cfg.Username, cfg.Password, cfg.Endpoints, want)
		}
	}
}

// No error of ParseEndpoints or Open shows a password, whatever is wrong
// with the spec and wherever the password's special characters are.
func TestEndpointErrorsHidePasswords(t *testing.T) {
	for _, in := range []string{
		"etcd://u:SECRET%zz@h1:2379",
		"etcd://u:SECRET%@h1:2379",
		"etcd://u:SECRET@h1",
		"etcd://u:SECRET@h1:x",
		"etcd://u:SEC/RET@h1",
		"etcd://u:SEC#RET@h1:2379#",
		"etcd://u:SEC#RET@",
		"etcd://u:SEC@RET@h1",
		"etcd://u:SEC?RET@h1",
		"etcd://u:SEC@RET?x@h1",
		"etcd://u:SEC@h9:1?RET@h1",
		"etcds://u:SECRET@h1:2379,h2",
		"http://u:SECRET@h1:2379",
		"https://h0:1,https://u:SECRET@h1:2379",
		"redis://u:SECRET@h1:6379",
		"u:SECRET@h1:2379",
		"u:SEC://RET@h1:2379",
		"etcd://u:SECRET@h1:2379?bogus=1",
		"etcd://u:SECRET@h1:2379?skip_verify=true",
		"etcd://u:SECRET@h1:2379?cert_file=/nonexistent.pem",
		"etcd://u:SECRET@h1:2379?password_file=/nonexistent",
		"etcd://u:SECRET@h1:2379?ca_file=%zz",
	} {
		_, err := ParseEndpoints(in)
		if !errors.Is(err, driver.ErrInvalid) {
			t.Errorf("ParseEndpoints(%q) = %v, want ErrInvalid", in, err)
			continue
		}
		_, oerr := Open(in)
		for _, e := range []error{err, oerr} {
			for _, piece := range []string{"SECRET", "SEC", "RET"} {
				if e != nil && strings.Contains(e.Error(), piece) {
					t.Errorf("ParseEndpoints/Open(%q): %q shows %q", in, e, piece)
					break
				}
			}
		}
	}
}

// The query string's parameters: TLS files, insecure_skip_verify,
// password_file, and the errors for everything else.
func TestParseEndpointsParams(t *testing.T) {
	certs := etcdserver.NewCerts(t)
	dir := t.TempDir()
	atDir := filepath.Join(dir, "a@b") // an '@' in a path must not end the user information
	write := func(path, content string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	atCA := write(filepath.Join(atDir, "ca.pem"), string(caPEM))
	pwFile := write(filepath.Join(dir, "pw"), "s3cr@t/#\r\n")
	emptyFile := write(filepath.Join(dir, "empty"), "\n")
	q := url.QueryEscape
	ok := []struct {
		in             string
		password       string
		roots, skip    bool
		clientCerts    int
		tls            bool
		user, endpoint string
	}{
		{in: "h1:2379?ca_file=" + q(certs.CA), roots: true, tls: true},
		{in: "http://h1:2379?ca_file=" + q(certs.CA), roots: true, tls: true},
		{in: "etcd://h1:2379?cert_file=" + q(certs.ClientCert) + "&key_file=" + q(certs.ClientKey), clientCerts: 1, tls: true},
		{in: "etcd://h1:2379?insecure_skip_verify=true", skip: true, tls: true},
		{in: "etcd://h1:2379?insecure_skip_verify=false"},
		{in: "etcds://h1:2379?ca_file=" + atCA, roots: true, tls: true},
		{in: "etcds://u:p@ss@h1:2379?ca_file=" + atCA, user: "u", password: "p@ss", roots: true, tls: true},
		{in: "etcd://u@h1:2379?password_file=" + q(pwFile), user: "u", password: "s3cr@t/#"},
		{in: "etcd://u:other@h1:2379/?password_file=" + q(pwFile) + "&", user: "u", password: "s3cr@t/#"},
		{in: "etcd://u:p@h1:2379?", user: "u", password: "p"},
	}
	for _, c := range ok {
		cfg, err := ParseEndpoints(c.in)
		if err != nil {
			t.Errorf("ParseEndpoints(%q): %v", c.in, err)
			continue
		}
		got := struct{ roots, skip, tls bool }{cfg.TLS != nil && cfg.TLS.RootCAs != nil, cfg.TLS != nil && cfg.TLS.InsecureSkipVerify, cfg.TLS != nil}
		if got.roots != c.roots || got.skip != c.skip || got.tls != c.tls || cfg.Username != c.user || cfg.Password != c.password ||
			!slices.Equal(cfg.Endpoints, []string{"h1:2379"}) || (cfg.TLS != nil && len(cfg.TLS.Certificates) != c.clientCerts) {
			t.Errorf("ParseEndpoints(%q): endpoints %v user %q password %q, TLS %+v", c.in, cfg.Endpoints, cfg.Username, cfg.Password, got)
		}
	}
	for in, want := range map[string]string{
		"etcds://h1:2379?cert_file=" + q(certs.ClientCert):                             "key_file",
		"etcds://h1:2379?key_file=" + q(certs.ClientKey):                               "cert_file",
		"etcds://h1:2379?cert_file=" + q(certs.CA) + "&key_file=" + q(certs.ClientKey): "cert_file and key_file",
		"etcds://h1:2379?bogus=1":                                                      `unknown parameter "bogus"`,
		"etcds://h1:2379?skip_verify=true":                                             "insecure_skip_verify=true",
		"etcds://h1:2379?insecure_skip_verify=yes":                                     "true or false",
		"etcds://h1:2379?ca_file=":                                                     "empty",
		"etcds://h1:2379?ca_file=a&ca_file=b":                                          "twice",
		"etcds://h1:2379?ca_file=" + q(dir+"/missing"):                                 "no such file",
		"etcds://h1:2379?ca_file=" + q(certs.ClientKey):                                "no PEM certificate",
		"etcds://h1:2379?ca_file=%zz":                                                  "percent-escape",
		"etcd://h1:2379?password_file=" + q(pwFile):                                    "needs a user name",
		"etcd://u@h1:2379?password_file=" + q(emptyFile):                               "empty",
		"etcd://u@h1:2379?password_file=" + q(dir+"/missing"):                          "no such file",
		"etcd://:pw@h1:2379":                                                           "without a user name",
	} {
		_, err := ParseEndpoints(in)
		if !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEndpoints(%q) = %v, want ErrInvalid saying %q", in, err, want)
		}
	}
}

// RedactEndpoints masks the password, and everything up to the last '@'
// when the password's end is not certain.
func TestRedactEndpoints(t *testing.T) {
	for in, want := range map[string]string{
		"etcd://u:pw@h1:2379":                      "etcd://u:xxxxx@h1:2379",
		"etcd://u:p@ss@h1:2379,h2:2379?ca_file=/a": "etcd://u:xxxxx@h1:2379,h2:2379?ca_file=/a",
		"etcd://u:a?b@c@h1:2379":                   "etcd://u:xxxxx@h1:2379",
		"etcds://u:pw@h1:2379?ca_file=/a@b/ca.pem": "etcds://u:xxxxx@b/ca.pem",
		"etcd://u@h1:2379":                         "etcd://u@h1:2379",
		"h1:2379,h2:2379":                          "h1:2379,h2:2379",
		"http://u:pw@h1:2379":                      "http://u:xxxxx@h1:2379",
		"u:pw@h1:2379":                             "u:xxxxx@h1:2379",
		"u:a://b@h1:2379":                          "u:xxxxx@h1:2379",
	} {
		if got := RedactEndpoints(in); got != want {
			t.Errorf("RedactEndpoints(%q) = %q, want %q", in, got, want)
		}
	}
}

// Without a user, Open does not wait for a connection; with one,
// OpenContext ends when its ctx does, with ctx's error. The endpoint
// accepts connections and never answers: one that refuses them fails
// OpenContext at once (TestOpenWithCredentialsUnreachable).
func TestOpenContextBounds(t *testing.T) {
	addr := etcdserver.SilentAddr(t)
	start := time.Now()
	c, err := Open(addr)
	if err != nil {
		t.Fatalf("Open(%s) without a user: %v", addr, err)
	}
	_ = c.Close()
	if took := time.Since(start); took >= DefaultRequestTimeout {
		t.Errorf("Open without a user took %v: it waited for a connection", took)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = OpenContext(ctx, "etcd://dl:SECRETPW@"+addr)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("OpenContext with a 200ms ctx took %v", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, dlock.ErrBackend) || strings.Contains(err.Error(), "SECRETPW") {
		t.Errorf("OpenContext past its deadline: %v, want ctx's error only, without the password", err)
	}
	cancelled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := OpenContext(cancelled, "etcd://dl:SECRETPW@"+addr); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenContext with a cancelled ctx: %v, want context.Canceled", err)
	}
}

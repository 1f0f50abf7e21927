package etcddriver

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/etcddriver/internal/etcdserver"
)

// lockOnce opens spec, takes and releases one lock, and returns the first
// error.
func lockOnce(t *testing.T, spec string) error {
	t.Helper()
	c, err := Open(spec)
	if err != nil {
		return err
	}
	defer c.Close()
	lease, err := c.TryLock(ctxT(t), "k/"+t.Name())
	if err != nil {
		return err
	}
	if lease.Token() == 0 {
		t.Errorf("%s: token 0", spec)
	}
	return lease.Unlock(ctxT(t))
}

// openWithin runs Open(spec) and fails the test if it has not returned
// within limit: far more than it needs, so that a loaded machine passes,
// and far less than for ever.
func openWithin(t *testing.T, spec string, limit time.Duration) (time.Duration, error) {
	t.Helper()
	type result struct {
		c   *dlock.Client
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		c, err := Open(spec)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		if r.c != nil {
			_ = r.c.Close()
		}
		return time.Since(start), r.err
	case <-time.After(limit):
		t.Fatalf("Open still running after %v", limit)
		return 0, nil
	}
}

// A server with authentication: the right password (with '@', '/', '#'
// and an escaped '%' in it) takes a lock; a wrong one is ErrBackend and
// its error shows neither password; password_file reads the password.
func TestOpenWithAuth(t *testing.T) {
	const password = "p@ss/w#rd%x"
	m := etcdserver.Start(t)
	etcdserver.EnableAuth(t, m, "rootpw", etcdserver.User{Name: "dl", Password: password})
	escaped := strings.ReplaceAll(password, "%", "%25")

	t.Run("right password", func(t *testing.T) {
		if err := lockOnce(t, "etcd://dl:"+escaped+"@"+m.Addr()); err != nil {
			t.Fatalf("with the right password: %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		err := lockOnce(t, "etcd://dl:WRONGPW@"+m.Addr())
		if !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("wrong password: %v, want ErrBackend", err)
		}
		if msg := err.Error(); strings.Contains(msg, "WRONGPW") || !strings.Contains(msg, m.Addr()) {
			t.Errorf("wrong password: %q: want the endpoint and not the password", msg)
		}
	})
	t.Run("password_file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(f, []byte(password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		q := "?password_file=" + url.QueryEscape(f)
		if err := lockOnce(t, "etcd://dl@"+m.Addr()+q); err != nil {
			t.Errorf("password_file: %v", err)
		}
		// The file's password replaces the one in the spec.
		if err := lockOnce(t, "etcd://dl:WRONGPW@"+m.Addr()+q); err != nil {
			t.Errorf("password_file over a wrong password: %v", err)
		}
		missing := "etcd://dl:SECRETPW@" + m.Addr() + "?password_file=" + url.QueryEscape(f+".missing")
		if err := lockOnce(t, missing); !errors.Is(err, dlock.ErrInvalidArgument) || strings.Contains(err.Error(), "SECRETPW") {
			t.Errorf("missing password_file: %v, want ErrInvalidArgument without the password", err)
		}
	})
}

// Open with credentials authenticates before it returns: against a port
// nothing listens on, it fails at once (failFastBound), with ErrBackend
// naming the endpoint and the refusal; against one that never answers, at
// DefaultRequestTimeout, saying so. Neither waits for ever or shows the
// password.
func TestOpenWithCredentialsUnreachable(t *testing.T) {
	for _, c := range []struct {
		name  string
		addr  string
		limit time.Duration
		cause string
	}{
		{"refused", etcdserver.FreeAddr(t), failFastBound, "connection refused"},
		{"silent", etcdserver.SilentAddr(t), 2 * DefaultRequestTimeout, "deadline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			took, err := openWithin(t, "etcd://dl:SECRETPW@"+c.addr, 20*time.Second)
			t.Logf("Open failed after %v: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, dlock.ErrBackend) {
				t.Fatalf("Open against %s: %v (after %v), want ErrBackend", c.addr, err, took)
			}
			if took > c.limit {
				t.Errorf("Open against %s took %v, want at most %v", c.addr, took, c.limit)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.addr) || !strings.Contains(msg, c.cause) || strings.Contains(msg, "SECRETPW") {
				t.Errorf("error %q: want the endpoint and %q, not the password", msg, c.cause)
			}
		})
	}
}

// A member that serves TLS and wants a client certificate: ca_file,
// cert_file and key_file reach it; without the certificate, or without the
// authority, a call fails with ErrBackend; insecure_skip_verify=true
// replaces the authority; the old name skip_verify is refused.
func TestOpenTLS(t *testing.T) {
	certs := etcdserver.NewCerts(t)
	m := etcdserver.StartTLS(t, certs)
	ca, cert, key := url.QueryEscape(certs.CA), url.QueryEscape(certs.ClientCert), url.QueryEscape(certs.ClientKey)
	base := "etcds://" + m.Addr() + "?"
	for _, c := range []struct {
		name, query string
		ok          bool
	}{
		{"client certificate", "ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key, true},
		{"implied by the parameters", "", true}, // a plain spec below
		{"insecure_skip_verify", "insecure_skip_verify=true&cert_file=" + cert + "&key_file=" + key, true},
		{"no client certificate", "ca_file=" + ca, false},
		{"no authority", "cert_file=" + cert + "&key_file=" + key, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spec := base + c.query
			if c.query == "" {
				spec = m.Addr() + "?ca_file=" + ca + "&cert_file=" + cert + "&key_file=" + key
			}
			err := lockOnce(t, spec)
			if c.ok && err != nil {
				t.Errorf("%s: %v", spec, err)
			}
			if !c.ok && !errors.Is(err, dlock.ErrBackend) {
				t.Errorf("%s: %v, want ErrBackend", spec, err)
			}
		})
	}
	t.Run("old name skip_verify", func(t *testing.T) {
		_, err := Open(base + "skip_verify=true")
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "insecure_skip_verify") {
			t.Errorf("skip_verify: %v, want ErrInvalidArgument naming insecure_skip_verify", err)
		}
	})
}

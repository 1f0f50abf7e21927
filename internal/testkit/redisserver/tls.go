package redisserver

import (
	"crypto/tls"
	"strconv"
	"testing"

	"github.com/dlockio/dlock/internal/testkit/tlscert"
)

// TLSFiles are the PEM files of a throwaway certificate authority and of
// a server and a client certificate it signed, for one test, and OtherCA,
// a second authority that signed nothing. The server certificate is for
// 127.0.0.1, ::1 and localhost.
type TLSFiles struct{ *tlscert.Files }

// NewTLSFiles generates a CA and a server and a client certificate signed
// by it into a temporary directory removed when t ends. Everything is
// made anew for each test, so no key outlives it.
func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	return &TLSFiles{tlscert.New(t, "redisserver")}
}

// ClientConfig is a TLS configuration that trusts the CA and presents the
// client certificate.
func (f *TLSFiles) ClientConfig(testing.TB) *tls.Config { return f.ClientTLS() }

// WithTLS makes the server listen with TLS only (the plain port is
// closed), with f's server certificate, and require a client certificate
// signed by f's CA (tls-auth-clients yes). Server.Client then connects
// with f.ClientConfig. It needs a server started by the test.
func WithTLS(f *TLSFiles) Option {
	return func(c *config) { c.tls = f }
}

// serverArgs are redis-server's arguments for a TLS-only server on port.
func (f *TLSFiles) serverArgs(port int) []string {
	return []string{
		"--port", "0",
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", f.ServerCert,
		"--tls-key-file", f.ServerKey,
		"--tls-ca-cert-file", f.CA,
		"--tls-auth-clients", "yes",
	}
}

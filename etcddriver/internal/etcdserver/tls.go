package etcdserver

import (
	"crypto/tls"
	"testing"

	"github.com/dlockio/dlock/internal/testkit/tlscert"
)

// Certs are the PEM files of a certificate authority made for one test and
// of the server and client certificates it signed. The server certificate
// names 127.0.0.1, where members listen, and serves as a client certificate
// too: etcd's own gateway dials the member with it, so under
// --client-cert-auth it needs both usages.
type Certs struct{ *tlscert.Files }

// NewCerts writes a fresh authority, server and client certificate into a
// temporary directory of t. They are valid for an hour either side of now,
// so that a clock a little off does not matter and nothing outlives the
// test.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	return &Certs{tlscert.New(t, "etcdserver")}
}

// ClientConfig trusts the authority and presents the client certificate.
func (c *Certs) ClientConfig(testing.TB) *tls.Config { return c.ClientTLS() }

// clientConfig is ClientConfig for goroutines other than the test's,
// which must not call t.Fatal.
func (c *Certs) clientConfig() (*tls.Config, error) { return c.ClientTLS(), nil }

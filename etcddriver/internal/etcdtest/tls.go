package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the PEM files of a certificate authority made for one test and
// of the server and client certificates it signed. The server certificate
// names 127.0.0.1, where members listen.
type Certs struct {
	CA         string // the authority's certificate
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
}

// NewCerts writes a fresh authority, server and client certificate into a
// temporary directory of t. They are valid for an hour either side of now,
// so that a clock a little off does not matter and nothing outlives the
// test.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	c := &Certs{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
	}
	caKey := genKey(t)
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "etcdtest CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caCert := sign(t, caTmpl, nil, caKey, caKey, c.CA)
	// etcd's own gateway dials the member with the server certificate as
	// its client certificate, so under --client-cert-auth it needs both
	// usages.
	serverKey, clientKey := genKey(t), genKey(t)
	sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcdtest server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, caCert, serverKey, caKey, c.ServerCert)
	writeKey(t, c.ServerKey, serverKey)
	sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcdtest client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, clientKey, caKey, c.ClientCert)
	writeKey(t, c.ClientKey, clientKey)
	return c
}

// ClientConfig trusts the authority and presents the client certificate.
func (c *Certs) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	cfg, err := c.clientConfig()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return cfg
}

// clientConfig is ClientConfig for goroutines other than the test's,
// which must not call t.Fatal.
func (c *Certs) clientConfig() (*tls.Config, error) {
	caPEM, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in the CA file")
	}
	pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func genKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("etcdtest: key: %v", err)
	}
	return k
}

// sign completes tmpl with a serial number and validity, signs it for key
// with parentKey as parent (tmpl itself when parent is nil: self-signed)
// and writes the certificate to certPath.
func sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, certPath string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		t.Fatalf("etcdtest: serial: %v", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("etcdtest: certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("etcdtest: certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return cert
}

func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("etcdtest: key: %v", err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
}

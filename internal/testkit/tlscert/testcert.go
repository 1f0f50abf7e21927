// Package tlscert makes the throwaway TLS certificates of one test: a
// certificate authority, a server and a client certificate it signed, and
// a second authority that signed nothing, written as PEM files into the
// test's temporary directory, with a ready client configuration. Keys are
// ECDSA P-256 and made anew for every test; certificates are valid for an
// hour either side of now, so a clock a little off does not matter and
// nothing outlives the test.
package tlscert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the paths of the PEM files New wrote.
type Files struct {
	Dir        string // the directory holding them
	CA         string // the authority's certificate
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
	// OtherCA is the certificate of a second authority that signed
	// nothing here: trusting it instead of CA must fail verification.
	OtherCA string

	pool   *x509.CertPool  // holds CA
	client tls.Certificate // ClientCert and ClientKey
}

// lifetime is how far either side of now the certificates are valid.
const lifetime = time.Hour

// New writes a fresh authority, server and client certificate and a
// second authority into a temporary directory removed when t ends. name
// begins the certificates' common names and t's failure messages.
//
// The server certificate is for 127.0.0.1, ::1 and localhost, and may
// serve as a client certificate too: a server that dials its own peers or
// itself (etcd's gateway does) presents it under client authentication.
func New(t testing.TB, name string) *Files {
	t.Helper()
	g := gen{t: t, name: name}
	dir := t.TempDir()
	f := &Files{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
		OtherCA:    filepath.Join(dir, "other-ca.crt"),
	}
	ca, caKey := g.ca(name+" CA", f.CA)
	g.ca(name+" other CA", f.OtherCA)
	g.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name + " server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, caKey, f.ServerCert, f.ServerKey)
	g.leaf(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name + " client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey, f.ClientCert, f.ClientKey)

	f.pool = x509.NewCertPool()
	f.pool.AddCert(ca)
	var err error
	if f.client, err = tls.LoadX509KeyPair(f.ClientCert, f.ClientKey); err != nil {
		g.fatalf("client certificate: %v", err)
	}
	return f
}

// ClientTLS is a new TLS configuration, the caller's to change, that
// trusts the CA and presents the client certificate. It does not fail, so
// any goroutine may call it.
func (f *Files) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: f.pool, Certificates: []tls.Certificate{f.client}, MinVersion: tls.VersionTLS12}
}

// gen makes keys and certificates, failing t on any error.
type gen struct {
	t    testing.TB
	name string
}

func (g gen) fatalf(format string, args ...any) {
	g.t.Helper()
	g.t.Fatalf(g.name+": "+format, args...)
}

// ca makes a self-signed authority and writes its certificate to path.
func (g gen) ca(cn, path string) (*x509.Certificate, *ecdsa.PrivateKey) {
	g.t.Helper()
	key := g.key()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der := g.sign(tmpl, tmpl, key, key)
	g.writePEM(path, "CERTIFICATE", der)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		g.fatalf("certificate %q: %v", cn, err)
	}
	return cert, key
}

// leaf signs tmpl, with a new key, by the authority and writes the
// certificate and the key.
func (g gen) leaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) {
	g.t.Helper()
	key := g.key()
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	g.writePEM(certPath, "CERTIFICATE", g.sign(tmpl, ca, key, caKey))
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		g.fatalf("key: %v", err)
	}
	g.writePEM(keyPath, "PRIVATE KEY", der)
}

// sign completes tmpl with a serial number and validity and signs it for
// key with parentKey.
func (g gen) sign(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	g.t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		g.fatalf("serial: %v", err)
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1)) // positive
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-lifetime), now.Add(lifetime)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		g.fatalf("certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return der
}

func (g gen) key() *ecdsa.PrivateKey {
	g.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		g.fatalf("key: %v", err)
	}
	return key
}

func (g gen) writePEM(path, kind string, der []byte) {
	g.t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		g.fatalf("%v", err)
	}
}

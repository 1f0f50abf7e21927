package redistest

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
	"strconv"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a throwaway certificate authority and of
// a server and a client certificate it signed, for one test. The server
// certificate is for 127.0.0.1 and localhost.
type TLSFiles struct {
	Dir        string // the directory holding them
	CA         string // the authority's certificate
	ServerCert string
	ServerKey  string
	ClientCert string
	ClientKey  string
	// OtherCA is the certificate of a second authority that signed
	// nothing here: trusting it instead of CA must fail verification.
	OtherCA string
}

// NewTLSFiles generates a CA and a server and a client certificate signed
// by it into a temporary directory removed when t ends. Everything is
// made anew for each test, so no key outlives it.
func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := &TLSFiles{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
		OtherCA:    filepath.Join(dir, "other-ca.crt"),
	}
	ca, caKey := newCA(t, "redistest CA")
	writePEM(t, f.CA, "CERTIFICATE", ca.Raw)
	other, _ := newCA(t, "redistest other CA")
	writePEM(t, f.OtherCA, "CERTIFICATE", other.Raw)
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redistest server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	signLeaf(t, server, ca, caKey, f.ServerCert, f.ServerKey)
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "redistest client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	signLeaf(t, client, ca, caKey, f.ClientCert, f.ClientKey)
	return f
}

// ClientConfig is a TLS configuration that trusts the CA and presents the
// client certificate.
func (f *TLSFiles) ClientConfig(t testing.TB) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("redistest: no certificate in the CA file")
	}
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

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

// certLifetime bounds the certificates to the test's span (and a clock
// a little off): an hour either side of now.
const certLifetime = time.Hour

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-certLifetime),
		NotAfter:              time.Now().Add(certLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("redistest: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: CA certificate: %v", err)
	}
	return cert, key
}

// signLeaf completes tmpl, signs it with the CA and writes the certificate
// and its key.
func signLeaf(t testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-certLifetime), time.Now().Add(certLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("redistest: certificate %s: %v", tmpl.Subject.CommonName, err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	writePEM(t, keyPath, "PRIVATE KEY", keyDER)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("redistest: serial: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

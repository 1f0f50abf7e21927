package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"testing"
)

// handshake runs a TLS handshake between a server with f's server
// certificate, requiring a client certificate signed by f's CA, and a
// client with cfg, and reports whether the handshake succeeded, with the
// client's error if not.
func handshake(t *testing.T, f *Files, cfg *tls.Config) (bool, error) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    f.pool,
		MinVersion:   tls.VersionTLS12,
	}
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := tls.Server(a, srv)
		_ = s.HandshakeContext(t.Context())
		s.Close()
	}()
	c := tls.Client(b, cfg)
	err = c.HandshakeContext(t.Context())
	if err == nil {
		// TLS 1.3 reports a rejected client certificate on the first read.
		_, err = c.Read(make([]byte, 1))
	}
	c.Close()
	<-done
	if errors.Is(err, io.EOF) { // the server's close after a handshake
		err = nil
	}
	return err == nil, err
}

func TestClientTLS(t *testing.T) {
	f := New(t, "tlscert")
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		cfg := f.ClientTLS()
		cfg.ServerName = host
		if ok, err := handshake(t, f, cfg); !ok {
			t.Errorf("%s: %v", host, err)
		}
	}

	// The server certificate works as a client certificate too.
	cfg := f.ClientTLS()
	cfg.ServerName = "localhost"
	serverPair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Certificates = []tls.Certificate{serverPair}
	if ok, err := handshake(t, f, cfg); !ok {
		t.Errorf("server certificate as client certificate: %v", err)
	}

	cfg = f.ClientTLS()
	cfg.ServerName = "localhost"
	cfg.Certificates = nil
	if ok, _ := handshake(t, f, cfg); ok {
		t.Error("the server accepted a client without a certificate")
	}

	other, err := os.ReadFile(f.OtherCA)
	if err != nil {
		t.Fatal(err)
	}
	cfg = f.ClientTLS()
	cfg.ServerName = "localhost"
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(other) {
		t.Fatal("no certificate in OtherCA")
	}
	if ok, _ := handshake(t, f, cfg); ok {
		t.Error("trusting OtherCA verified the server")
	}
}

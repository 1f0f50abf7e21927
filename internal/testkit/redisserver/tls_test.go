package redisserver

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A TLS server answers a client that presents the client certificate,
// has no plain port, and refuses a client without a certificate.
func TestTLSServer(t *testing.T) {
	files := NewTLSFiles(t)
	s := Start(t, WithTLS(files))
	ctx := t.Context()
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if _, err := command(s.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("plain PING answered: the port is not TLS-only")
	}
	noCert := files.ClientConfig(t)
	noCert.Certificates = nil
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: noCert, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING without a client certificate answered")
	}
	if _, err := commandTLS(s.Addr(), &tls.Config{MinVersion: tls.VersionTLS12}, time.Second, "PING"); err == nil {
		t.Fatal("a client that does not trust the CA got an answer")
	}
}

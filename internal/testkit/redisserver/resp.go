package redisserver

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// command sends a single command to addr over a fresh connection, speaking
// just enough RESP to read a simple, integer or bulk string reply. It is used
// for readiness probes so that probing does not depend on a client library
// (and leaves no goroutines behind).
func command(addr string, timeout time.Duration, args ...string) (string, error) {
	return commandTLS(addr, nil, timeout, args...)
}

// commandTLS is command over TLS with tc, or in plain TCP when tc is nil.
func commandTLS(addr string, tc *tls.Config, timeout time.Duration, args ...string) (string, error) {
	d := &net.Dialer{Timeout: timeout}
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, tc) // the timeout bounds the handshake too
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}

	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis error: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", errors.New("nil reply")
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}

// infoField extracts "name:value" from an INFO reply.
func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freeAddr is a loopback address nothing listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// scrape fetches url and returns the sum of the samples of metric whose
// labels contain every one of labels (name="value" pairs), and whether
// there was any such sample; err when the page could not be had.
func scrape(client *http.Client, url, metric string, labels ...string) (float64, bool, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, false, &scrapeError{resp.Status + ": " + string(b)}
	}
	var sum float64
	var found bool
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			name, rest, ok = strings.Cut(line, " ")
			rest = "} " + rest
		}
		if !ok || name != metric {
			continue
		}
		labelPart, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(","+labelPart+",", ","+l+",")
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return 0, false, &scrapeError{"bad sample " + line}
		}
		sum, found = sum+v, true
	}
	return sum, found, sc.Err()
}

type scrapeError struct{ msg string }

func (e *scrapeError) Error() string { return e.msg }

func TestRunMetricsAddrServesTheRunsLockMetrics(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	addr := freeAddr(t)
	stop := filepath.Join(t.TempDir(), "stop")
	p := start(t, url, "run", "--metrics-addr", addr, "job", "--",
		"sh", "-c", `while [ ! -e "$1" ]; do sleep 0.02; done`, "sh", stop)
	client := &http.Client{Timeout: 2 * time.Second}
	metricsURL := "http://" + addr + "/metrics"
	var held, acquired float64
	var lastErr error
	for deadline := time.Now().Add(15 * time.Second); ; {
		var okH, okA bool
		held, okH, lastErr = scrape(client, metricsURL, "dlock_leases_held")
		if lastErr == nil {
			acquired, okA, lastErr = scrape(client, metricsURL, "dlock_acquire_total", `result="acquired"`)
		}
		if lastErr == nil && okH && okA && held == 1 && acquired == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the held lock: dlock_leases_held %v, acquired %v, last error %v; stderr %q",
				held, acquired, lastErr, p.stderr.String())
		}
		select {
		case <-p.done:
			t.Fatalf("run ended with %d before its metrics showed the lock; stderr %q", p.code, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !lockHeld(t, rdb, "job") {
		t.Fatal("metrics show a held lease but Redis has no holder")
	}
	// Only the run's own registry is served: no Go runtime or process
	// collectors from a global registry.
	if _, found, err := scrape(client, metricsURL, "go_goroutines"); err != nil || found {
		t.Errorf("go_goroutines served (found %v, err %v): the default registry leaked in", found, err)
	}
	if err := writeFile(stop); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(15 * time.Second); code != 0 {
		t.Fatalf("run: status %d, want 0; stderr %q", code, p.stderr.String())
	}
	if lockHeld(t, rdb, "job") {
		t.Error("lock still held after run exited")
	}
	if _, _, err := scrape(client, metricsURL, "dlock_leases_held"); err == nil {
		t.Error("metrics still served after dlock exited")
	}
}

func TestRunMetricsAddrThatCannotBeListenedOn(t *testing.T) {
	t.Parallel()
	url, rdb := server(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	for _, addr := range []string{busy.Addr().String(), "127.0.0.1:notaport"} {
		code, _, stderr := dlock(t, url, "run", "--metrics-addr", addr, "job", "--", "true")
		if code != 64 || !strings.Contains(stderr, "--metrics-addr") {
			t.Errorf("--metrics-addr %s: status %d, stderr %q; want 64 naming the flag", addr, code, stderr)
		}
		oneLine(t, stderr)
		n, err := rdb.Exists(context.Background(), lockKey("job")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("--metrics-addr %s: the lock's key exists in Redis", addr)
		}
	}
	// The variable is the same flag.
	code, _, stderr := dlockEnv(t, url, []string{"DLOCK_METRICS_ADDR=" + busy.Addr().String()}, "run", "job", "--", "true")
	if code != 64 || !strings.Contains(stderr, "--metrics-addr") {
		t.Errorf("DLOCK_METRICS_ADDR busy: status %d, stderr %q; want 64", code, stderr)
	}
}

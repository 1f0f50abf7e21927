package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/memdriver"
)

// memBackend is a store for testing the wiring of Options: --mem SPEC on
// one in-memory store shared by every Client it opens. It records the
// specs it was opened with.
type memBackend struct {
	drv   *memdriver.Driver
	mu    sync.Mutex
	specs []string
	nopts []int
	conns []*memdriver.Driver // the handle of each Client opened
}

func newMemBackend(t *testing.T) *memBackend {
	m := &memBackend{drv: memdriver.New()}
	t.Cleanup(func() { _ = m.drv.Close() })
	return m
}

func (m *memBackend) backend() Backend {
	return Backend{Flag: "mem", Arg: "NAME", Usage: "in-memory store", Open: m.open}
}

func (m *memBackend) open(spec string, opts ...dlock.Option) (*dlock.Client, error) {
	m.mu.Lock()
	m.specs = append(m.specs, spec)
	m.nopts = append(m.nopts, len(opts))
	m.mu.Unlock()
	if spec == "bad" {
		return nil, errors.New("bad spec")
	}
	conn := m.drv.Connect()
	m.mu.Lock()
	m.conns = append(m.conns, conn)
	m.mu.Unlock()
	return dlock.New(conn, opts...)
}

// conn is the store handle of the i-th Client opened.
func (m *memBackend) conn(i int) *memdriver.Driver {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conns[i]
}

func (m *memBackend) opened() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.specs...)
}

func (m *memBackend) held(t *testing.T, key string) bool {
	t.Helper()
	c, err := dlock.New(m.drv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, held, err := c.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return held
}

// testMetrics is an exporter whose handler serves a fixed text, fed by
// obs (none without it).
func testMetrics(obs ...dlock.Observer) Metrics {
	return func() (http.Handler, dlock.Observer, error) {
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "test_metric 1\n") })
		if len(obs) == 0 {
			return h, nil, nil
		}
		return h, obs[0], nil
	}
}

// testOptions is an Options with every hook set.
func testOptions(t *testing.T) Options {
	return Options{Backends: []Backend{newMemBackend(t).backend()}, Metrics: testMetrics()}
}

// runWith is run with opts and a variable table.
func runWith(opts Options, vars map[string]string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	env := Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }}
	code := Main(context.Background(), args, env, opts)
	return code, stdout.String(), stderr.String()
}

func TestBackendIsChosenByItsFlagOrVariable(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string // the spec --mem was opened with; "" for not opened
		code int
	}{
		{"flag after the command", nil, []string{"status", "--mem", "a", "k"}, "a", ExitNotHeld},
		{"flag before the command", nil, []string{"--mem", "b", "list"}, "b", ExitOK},
		{"variable", map[string]string{"DLOCK_MEM": "c"}, []string{"status", "k"}, "c", ExitNotHeld},
		{"flag wins over the other store's variable", map[string]string{"DLOCK_REDIS": "redis://x"}, []string{"status", "--mem", "d", "k"}, "d", ExitNotHeld},
		{"flag wins over its own variable", map[string]string{"DLOCK_MEM": "x"}, []string{"list", "--mem", "e"}, "e", ExitOK},
		{"two flags", nil, []string{"status", "--mem", "a", "--redis", "redis://x", "k"}, "", ExitUsage},
		{"two variables", map[string]string{"DLOCK_REDIS": "redis://x", "DLOCK_MEM": "a"}, []string{"list"}, "", ExitUsage},
		{"a failing Open is a usage error", nil, []string{"list", "--mem", "bad"}, "bad", ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemBackend(t)
			code, _, stderr := runWith(Options{Backends: []Backend{m.backend()}}, tc.vars, tc.args...)
			if code != tc.code {
				t.Fatalf("status %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			got := m.opened()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("opened %q, want not opened", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("opened %q, want [%q]", got, tc.want)
			}
			if tc.code == ExitUsage && strings.Count(stderr, "\n") != 1 {
				t.Errorf("want one line on stderr, got %q", stderr)
			}
		})
	}
}

func TestBackendLockExcludesAcrossRuns(t *testing.T) {
	m := newMemBackend(t)
	opts := Options{Backends: []Backend{m.backend()}}
	code, _, stderr := runWith(opts, nil, "run", "--mem", "m", "k", "--", "/bin/sh", "-c", "exit 3")
	if code != 3 {
		t.Fatalf("run: status %d, want COMMAND's 3 (stderr %q)", code, stderr)
	}
	if m.held(t, "k") {
		t.Fatal("lock still held after run")
	}
	c, err := dlock.New(m.drv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	l, err := c.TryLock(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(context.Background()) }()
	code, _, stderr = runWith(opts, nil, "run", "--mem", "m", "-n", "k", "--", "true")
	if code != ExitNotAcquired || !strings.Contains(stderr, "not acquired") {
		t.Fatalf("run -n on a held lock: status %d (stderr %q), want %d", code, stderr, ExitNotAcquired)
	}
}

func TestInvalidOptionsAreInternalErrors(t *testing.T) {
	dup := Backend{Flag: "etcd", Open: func(string, ...dlock.Option) (*dlock.Client, error) { return nil, errors.New("unused") }}
	if code, _, stderr := runWith(Options{Backends: []Backend{dup, dup}}, nil, "list"); code != ExitSoftware {
		t.Errorf("two backends --etcd: status %d, stderr %q; want %d", code, stderr, ExitSoftware)
	}
	open := func(string, ...dlock.Option) (*dlock.Client, error) { return nil, errors.New("unused") }
	for _, b := range []Backend{
		{Flag: "", Open: open},
		{Flag: "Etcd", Open: open},
		{Flag: "redis", Open: open},
		{Flag: "ttl", Open: open},
		{Flag: "nb", Open: open},
		{Flag: "etcd"},
	} {
		code, _, stderr := runWith(Options{Backends: []Backend{b}}, nil, "run", "k", "--", "true")
		if code != ExitSoftware || !strings.Contains(stderr, "invalid cli.Options") {
			t.Errorf("backend %+v: status %d, stderr %q; want %d", b, code, stderr, ExitSoftware)
		}
	}
}

func TestMetricsFlagOnlyWithAnExporter(t *testing.T) {
	code, stdout, _ := runWith(Options{}, nil, "run", "--help")
	if code != 0 || strings.Contains(stdout, "metrics-addr") {
		t.Errorf("run --help without an exporter: status %d, shows --metrics-addr: %v", code, strings.Contains(stdout, "metrics-addr"))
	}
	code, _, stderr := runWith(Options{}, nil, "run", "--metrics-addr", "127.0.0.1:1", "k", "--", "true")
	if code != ExitUsage || !strings.Contains(stderr, "unknown flag --metrics-addr ") {
		t.Errorf("--metrics-addr without an exporter: status %d, stderr %q; want the flag as typed, with two dashes", code, stderr)
	}
	code, stdout, _ = runWith(testOptions(t), nil, "run", "--help")
	if code != 0 || !strings.Contains(stdout, "--metrics-addr ADDR") || !strings.Contains(stdout, "$DLOCK_METRICS_ADDR") {
		t.Errorf("run --help with an exporter: status %d, no --metrics-addr ADDR with its variable:\n%s", code, stdout)
	}
}

// freeAddr is a loopback address nothing listens on.
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

func TestMetricsServedWhileTheRunHoldsTheLock(t *testing.T) {
	m := newMemBackend(t)
	opts := Options{Backends: []Backend{m.backend()}, Metrics: testMetrics()}
	addr := freeAddr(t)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdinW.Close() }()
	var stderr bytes.Buffer
	env := Env{Stdin: stdinR, Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		// COMMAND runs until the test writes a line to its stdin.
		done <- Main(context.Background(), []string{"run", "--mem", "m", "--metrics-addr", addr, "k", "--", "/bin/sh", "-c", "read x"}, env, opts)
	}()
	client := &http.Client{Timeout: time.Second}
	url := "http://" + addr + metricsPath
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := client.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			body = string(b)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", url, resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v after 10 s", url, err)
		}
		select {
		case code := <-done:
			t.Fatalf("run ended with %d before serving metrics (stderr %q)", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if body != "test_metric 1\n" {
		t.Errorf("GET /metrics = %q, want the exporter's text", body)
	}
	if resp, err := client.Get("http://" + addr + "/other"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /other: %v %v, want 404", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	// The listener is opened before the lock is requested; wait until the
	// run holds it, then end COMMAND.
	for deadline := time.Now().Add(10 * time.Second); !m.held(t, "k"); {
		if time.Now().After(deadline) {
			t.Fatal("lock not held within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = io.WriteString(stdinW, "\n")
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run: status %d (stderr %q)", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not end after COMMAND's input")
	}
	if _, err := client.Get(url); err == nil {
		t.Error("metrics still served after run returned")
	}
}

func TestMetricsAddrThatCannotBeListenedOn(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	for _, addr := range []string{"nope", busy.Addr().String()} {
		m := newMemBackend(t)
		opts := Options{Backends: []Backend{m.backend()}, Metrics: testMetrics()}
		code, _, stderr := runWith(opts, nil, "run", "--mem", "m", "--metrics-addr", addr, "k", "--", "true")
		if code != ExitUsage || !strings.Contains(stderr, "--metrics-addr") {
			t.Errorf("--metrics-addr %s: status %d, stderr %q; want %d naming the flag", addr, code, stderr, ExitUsage)
		}
		if len(m.opened()) != 0 {
			t.Errorf("--metrics-addr %s: the store was opened", addr)
		}
	}
}

// eventCounter counts a Client's acquisitions and releases.
type eventCounter struct {
	dlock.BaseObserver
	mu                 sync.Mutex
	acquired, released int
}

func (c *eventCounter) Acquire(e dlock.AcquireEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Result == dlock.ResultAcquired {
		c.acquired++
	}
}

func (c *eventCounter) Release(e dlock.ReleaseEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.WasHeld {
		c.released++
	}
}

// TestMetricsObserverSeesTheRun: the exporter's Observer gets the run's
// events, alongside the one run installs to learn why a lease was lost.
func TestMetricsObserverSeesTheRun(t *testing.T) {
	m := newMemBackend(t)
	var ec eventCounter
	opts := Options{Backends: []Backend{m.backend()}, Metrics: testMetrics(&ec)}
	code, _, stderr := runWith(opts, nil, "run", "--mem", "m", "--metrics-addr", freeAddr(t), "k", "--", "true")
	if code != 0 {
		t.Fatalf("status %d, stderr %q", code, stderr)
	}
	// Close, before Main returned, delivered every queued event.
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.acquired != 1 || ec.released != 1 {
		t.Errorf("the exporter saw %d acquisitions and %d releases, want 1 and 1", ec.acquired, ec.released)
	}
}

func TestDemoRefusesAnotherStore(t *testing.T) {
	code, _, stderr := runWith(testOptions(t), nil, "--mem", "m", "demo")
	if code != ExitUsage || !strings.Contains(stderr, "Redis only") {
		t.Errorf("demo with --mem: status %d, stderr %q", code, stderr)
	}
}

func TestMainHelpNamesTheStores(t *testing.T) {
	code, stdout, _ := runWith(testOptions(t), nil, "--help")
	for _, want := range []string{"[--redis URL | --mem NAME]", "--mem NAME", "$DLOCK_MEM", "--redis, --mem are exclusive"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("dlock --help (status %d) lacks %q:\n%s", code, want, stdout)
		}
	}
	_, stdout, _ = runWith(Options{}, nil, "--help")
	if strings.Contains(stdout, "Other stores") {
		t.Errorf("dlock --help of a Redis-only build mentions other stores")
	}
}

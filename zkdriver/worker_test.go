package zkdriver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockio/dlock"
	"github.com/dlockio/dlock/internal/testkit/workerproc"
	"github.com/dlockio/dlock/zkdriver/internal/zkserver"
)

const workerEnv = "DLOCK_ZK_FAULT_WORKER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(runWorker(cfg))
	}
	code := m.Run()
	zkserver.StopShared()
	os.Exit(code)
}

// workerConfig is a holder process's: it takes Key on Servers, reports
// "acquired", and on each line of its standard input reports whether it
// still believes it holds the lock ("belief", Lost set when not).
type workerConfig struct {
	Name    string        `json:"name"`
	Servers string        `json:"servers"`
	Prefix  string        `json:"prefix"`
	Key     string        `json:"key"`
	Session time.Duration `json:"session"`
}

func runWorker(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	emit := workerproc.Emitter(cfg.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, granted, err := connect(ctx, strings.Split(cfg.Servers, ","), cfg.Session, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 2
	}
	defer conn.Close()
	d, err := New(conn, WithPrefix(cfg.Prefix), WithSessionTimeout(granted))
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		return 2
	}
	c, err := dlock.New(d, dlock.WithDefaultTTL(d.MaxTTL()), dlock.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	defer c.Close()
	l, err := c.Lock(ctx, cfg.Key)
	if err != nil {
		emit(workerproc.Event{K: "error", Err: err.Error()})
		return 1
	}
	emit(workerproc.Event{K: "acquired", Tok: l.Token()})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		emit(workerproc.Event{K: "belief", Tok: l.Token(), Lost: l.Err() != nil})
	}
	return 0
}

// TestFrozenHolder: a holder process stopped with SIGSTOP past its
// session timeout loses the lock to a waiter within the session timeout
// plus a tick of the servers, with a greater token; once resumed, it
// knows at once that its lease is over.
func TestFrozenHolder(t *testing.T) {
	e := zkserver.StartEnsemble(t, 3)
	h := workerproc.New(t, workerEnv)
	h.Spawn("holder", workerConfig{Name: "holder", Servers: e.Servers(), Prefix: "/frozen", Key: "k", Session: faultSession})
	acq, next, ok := h.WaitFor(0, 30*time.Second, func(ev workerproc.Event) bool { return ev.K == "acquired" || ev.K == "error" })
	if !ok || acq.K != "acquired" {
		t.Fatalf("holder: %+v", acq)
	}
	c, _ := faultClient(t, e.Servers(), "/frozen")
	h.Signal("holder", syscall.SIGSTOP)
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(stopped)
	if bound := faultSession + zkserver.TickTime; took > bound {
		t.Errorf("takeover %v after the holder froze, want at most the session timeout plus a tick, %v", took, bound)
	}
	if l.Token() <= acq.Tok {
		t.Errorf("token after the takeover %d, frozen holder's %d: want greater", l.Token(), acq.Tok)
	}
	h.Signal("holder", syscall.SIGCONT)
	h.Send("holder", "still?")
	b, _, ok := h.WaitFor(next, 10*time.Second, func(ev workerproc.Event) bool { return ev.K == "belief" })
	if !ok {
		t.Fatal("resumed holder did not answer")
	}
	if !b.Lost {
		t.Errorf("resumed holder still believes it holds the lock while %d does", l.Token())
	}
	t.Logf("takeover %v after SIGSTOP (session %v); the resumed holder knew its lease was lost", took.Round(time.Millisecond), faultSession)
	_ = l.Unlock(ctx)
}

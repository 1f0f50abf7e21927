package etcddriver

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// fencedCounter is the protected resource of the fault tests: a counter
// that holders read and increment over HTTP, passing their fencing token.
// It rejects any request whose token is below the highest it has seen, as
// a database checking tokens would, and records what it accepted.
type fencedCounter struct {
	addr string

	mu       sync.Mutex
	maxToken uint64
	value    int64
	accepted int // writes accepted
	rejected int // requests refused by fencing
	lost     int // accepted writes that did not build on the current value
}

func newFencedCounter(t *testing.T) *fencedCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fencedCounter{addr: ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(f.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

// serve answers /read?tok=N with the value, and /write?tok=N&val=V; a
// fenced-off request gets 409.
func (f *fencedCounter) serve(w http.ResponseWriter, r *http.Request) {
	tok, err := strconv.ParseUint(r.URL.Query().Get("tok"), 10, 64)
	if err != nil {
		http.Error(w, "bad token", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if tok < f.maxToken {
		f.rejected++
		http.Error(w, "stale token", http.StatusConflict)
		return
	}
	f.maxToken = tok
	switch r.URL.Path {
	case "/read":
		fmt.Fprint(w, f.value)
	case "/write":
		val, err := strconv.ParseInt(r.URL.Query().Get("val"), 10, 64)
		if err != nil {
			http.Error(w, "bad value", http.StatusBadRequest)
			return
		}
		if val != f.value+1 {
			f.lost++
		}
		f.value = val
		f.accepted++
	default:
		http.NotFound(w, r)
	}
}

func (f *fencedCounter) stats() (value int64, accepted, rejected, lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.value, f.accepted, f.rejected, f.lost
}

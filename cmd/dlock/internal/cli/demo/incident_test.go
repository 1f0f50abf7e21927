package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockio/dlock/internal/testkit/redisserver"
)

// checkIncident asserts what the incident must show: the lock alone lets
// every paused holder charge a second time; fencing refuses every one;
// idempotency also keeps B's result for every order and refuses A's
// attempt to record its failure over it.
func checkIncident(t *testing.T, inc *Incident) {
	t.Helper()
	if len(inc.Columns) != 3 {
		t.Fatalf("%d columns", len(inc.Columns))
	}
	only, fenced, idem := inc.Columns[0], inc.Columns[1], inc.Columns[2]
	t.Logf("lock only %+v\nfencing %+v\nidempotency %+v", only, fenced, idem)
	for _, c := range inc.Columns {
		if c.Charged != incidentOrders || c.Paused != incidentOrders {
			t.Errorf("%s: %d charged, %d paused, want %d each", c.Strategy, c.Charged, c.Paused, incidentOrders)
		}
	}
	if only.ChargedTwice != incidentOrders || only.StaleAccepted != incidentOrders {
		t.Errorf("lock only: %d charged twice, %d stale accepted; the incident did not reproduce", only.ChargedTwice, only.StaleAccepted)
	}
	for _, c := range inc.Columns[1:] {
		if c.ChargedTwice != 0 || c.StaleAccepted != 0 || c.StaleRejected != incidentOrders {
			t.Errorf("%s: %d charged twice, %d stale accepted, %d rejected", c.Strategy, c.ChargedTwice, c.StaleAccepted, c.StaleRejected)
		}
	}
	if only.Records != -1 || fenced.Records != -1 {
		t.Errorf("columns without records report %d and %d stored results", only.Records, fenced.Records)
	}
	if idem.Records != incidentOrders || idem.StaleRecordsRefused != incidentOrders {
		t.Errorf("idempotency: %d orders with a stored result, %d stale outcomes refused; want %d each", idem.Records, idem.StaleRecordsRefused, incidentOrders)
	}
	if inc.Violations() != 0 {
		t.Errorf("violations %d", inc.Violations())
	}
	var b strings.Builder
	inc.writeTable(&b)
	for _, want := range []string{"lock only", "lock + fencing", "lock + fencing + idempotency", "orders charged more than once", "stale charges rejected", "orders with a stored result"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestIncidentEmbedded(t *testing.T) {
	srv := miniredis.NewMiniRedis()
	srv.ClockTTL(true)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var progress bytes.Buffer
	inc, err := runIncident(t.Context(), "redis://"+srv.Addr(), "t:", 300*time.Millisecond, newPrinter(&progress))
	if err != nil {
		t.Fatal(err)
	}
	checkIncident(t, inc)
	if !strings.Contains(progress.String(), "refused A's stale charge") {
		t.Errorf("progress does not show the refusal:\n%s", progress.String())
	}
	// Nothing is left without an expiry, fence keys included (dlock's
	// released values expire with the TTL their lock had left).
	for _, k := range srv.Keys() {
		if srv.TTL(k) <= 0 {
			t.Errorf("key %q left without expiry", k)
		}
	}
}

func TestIncidentOnServer(t *testing.T) {
	s := redisserver.Start(t)
	inc, err := runIncident(t.Context(), "redis://"+s.Addr(), "t:", 300*time.Millisecond, newPrinter(nil))
	if err != nil {
		t.Fatal(err)
	}
	checkIncident(t, inc)
}

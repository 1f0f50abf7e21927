package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Violations counts outcomes a correct lock must prevent: orders written
// twice and stale writes that got through.
func (m Metrics) Violations() int { return m.DoubleProcessed + m.StaleAccepted }

// WriteTable prints the side-by-side comparison.
func (r *Report) WriteTable(w io.Writer) error {
	ttl := time.Duration(r.TTLMS) * time.Millisecond
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d instances drain %d orders; the queue delivers every order twice. Lock TTL %v.\n",
		r.Workers, r.Orders, ttl)
	fmt.Fprintf(&b, "%s take %v (longer than the TTL); %s an instance freezes for %v\n",
		plural(r.SlowOrders, "slow order", "slow orders"), time.Duration(r.SlowWorkMS)*time.Millisecond,
		plural(r.Freezes, "once", "times"), time.Duration(r.FreezeMS)*time.Millisecond)
	fmt.Fprintf(&b, "(a GC-like pause) after checking its lock, right before its write. Redis: %s.\n\n", r.Redis)

	n, d := r.Naive, r.Dlock
	rows := [][3]string{
		{"", "naive lock", "dlock"},
		{"orders completed", fmt.Sprintf("%d/%d", n.OrdersCompleted, r.Orders), fmt.Sprintf("%d/%d", d.OrdersCompleted, r.Orders)},
		{"orders processed more than once", itoa(n.DoubleProcessed), itoa(d.DoubleProcessed)},
		{"overlaps (two instances inside at once)", itoa(n.Overlaps), overlapCell(d)},
		{"foreign locks deleted by a release", itoa(n.ForeignDeletes), itoa(d.ForeignDeletes)},
		{"stale writes accepted", itoa(n.StaleAccepted), itoa(d.StaleAccepted)},
		{"stale writes rejected by fencing", itoa(n.StaleRejected) + " (no tokens)", itoa(d.StaleRejected)},
		{"locks lost, as seen by their holder", "never seen", itoa(d.LeasesLost)},
		{"run time", secs(n.Seconds), secs(d.Seconds)},
	}
	var width [3]int
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "%-*s   %*s   %*s\n", width[0], row[0], width[1], row[1], width[2], row[2])
	}

	b.WriteString("\nnaive lock: SETNX then EXPIRE, no renewal, DEL without an ownership check; it\n")
	b.WriteString("has no tokens, so the order database cannot tell a stale write from a fresh one.\n")
	if d.Overlaps > 0 {
		fmt.Fprintf(&b, "dlock overlaps: %d of %d happened while the instance already inside was frozen\n", d.OverlapsBesideLostLease, d.Overlaps)
		b.WriteString("and its lease had already ended as lost; no lock can stop a paused process, but\n")
		fmt.Fprintf(&b, "fencing rejected %s when such instances woke up.\n", plural(d.StaleRejected, "stale write", "stale writes"))
	}
	if d.TokenRegressions == 0 {
		fmt.Fprintf(&b, "dlock fencing tokens rose strictly on all %d acquisitions.\n", d.Acquisitions)
	} else {
		fmt.Fprintf(&b, "WARNING: %d of %d dlock acquisitions got a token not above the previous one.\n", d.TokenRegressions, d.Acquisitions)
	}
	if r.Incident != nil {
		r.Incident.writeTable(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func overlapCell(m Metrics) string {
	switch m.OverlapsBesideLostLease {
	case 0:
		return itoa(m.Overlaps)
	case m.Overlaps:
		return fmt.Sprintf("%d (holder frozen)", m.Overlaps)
	}
	return fmt.Sprintf("%d (%d holder frozen)", m.Overlaps, m.OverlapsBesideLostLease)
}

func itoa(n int) string { return fmt.Sprint(n) }

func secs(s float64) string { return fmt.Sprintf("%.1fs", s) }

// plural spells n with the singular or plural word; "once" stands alone.
func plural(n int, one, many string) string {
	switch {
	case n == 1 && one == "once":
		return one
	case n == 1:
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

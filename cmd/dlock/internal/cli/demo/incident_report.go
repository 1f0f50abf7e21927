package demo

import (
	"fmt"
	"strings"
	"time"
)

// writeTable prints the incident's columns side by side.
func (inc *Incident) writeTable(b *strings.Builder) {
	ttl := time.Duration(inc.TTLMS) * time.Millisecond
	fmt.Fprintf(b, "\nThe duplicated-order incident, on dlock's lock: %d orders, each delivered twice.\n", incidentOrders)
	b.WriteString("Instance A locks the order, finds it unprocessed, checks its lease (held) and\n")
	fmt.Fprintf(b, "freezes right before charging, past the %v TTL; B takes the redelivery.\n\n", ttl)

	rows := [][]string{{""}}
	for _, c := range inc.Columns {
		rows[0] = append(rows[0], c.Strategy)
	}
	add := func(label string, f func(IncidentColumn) string) {
		row := []string{label}
		for _, c := range inc.Columns {
			row = append(row, f(c))
		}
		rows = append(rows, row)
	}
	add("orders charged", func(c IncidentColumn) string { return fmt.Sprintf("%d/%d", c.Charged, c.Orders) })
	add("orders charged more than once", func(c IncidentColumn) string { return itoa(c.ChargedTwice) })
	add("holders paused past their TTL", func(c IncidentColumn) string { return itoa(c.Paused) })
	add("stale charges accepted", func(c IncidentColumn) string { return itoa(c.StaleAccepted) })
	add("stale charges rejected (ErrStaleToken)", func(c IncidentColumn) string { return itoa(c.StaleRejected) })
	add("orders with a stored result", func(c IncidentColumn) string {
		if c.Records < 0 {
			return "-"
		}
		return fmt.Sprintf("%d/%d", c.Records, c.Orders)
	})
	add("stale outcomes refused (ErrClaimLost)", func(c IncidentColumn) string {
		if c.StaleRecordsRefused < 0 {
			return "-"
		}
		return itoa(c.StaleRecordsRefused)
	})
	add("run time", func(c IncidentColumn) string { return secs(c.Seconds) })

	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	for _, row := range rows {
		fmt.Fprintf(b, "%-*s", width[0], row[0])
		for i, c := range row[1:] {
			fmt.Fprintf(b, "   %*s", width[i+1], c)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nThe lock cannot stop a paused holder: its lease ended while it was frozen, and it\n")
	b.WriteString("only learns so after it has acted. The fenced store (fence/redisfence) has seen B's\n")
	b.WriteString("higher token and refuses A's charge. With idempotency (package once) the order's\n")
	b.WriteString("record also holds B's result for every later duplicate, and A cannot overwrite it.\n")
}

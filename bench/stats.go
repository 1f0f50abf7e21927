package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

// fmtDur prints a latency with a unit chosen for readability.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// fmtRate prints a per-second rate with thousands grouping.
func fmtRate(v float64) string {
	n := int64(v + 0.5)
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtBytes prints a byte count in binary units.
func fmtBytes(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.2f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// fairness prints the least and most acquisitions of any worker and their ratio.
func fairness(perWorker []int64) string {
	if len(perWorker) == 0 {
		return "–"
	}
	lo, hi := slices.Min(perWorker), slices.Max(perWorker)
	ratio := 0.0
	if hi > 0 {
		ratio = float64(lo) / float64(hi)
	}
	return fmt.Sprintf("%d / %d (%.2f)", lo, hi, ratio)
}

// processCPU returns this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// memInUse returns heap plus goroutine stack bytes in use after a full GC,
// so that implementations keeping one goroutine per lease pay for it.
func memInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// redisStats is a snapshot of the counters the benchmark reads from INFO.
type redisStats struct {
	commands int64   // total_commands_processed, including commands run by scripts
	subs     int64   // calls of (un)subscribe commands
	cpu      float64 // used_cpu_user + used_cpu_sys, seconds
}

func readRedisStats(ctx context.Context, rdb *redis.Client) (redisStats, error) {
	text, err := rdb.Info(ctx, "stats", "cpu", "commandstats").Result()
	if err != nil {
		return redisStats{}, err
	}
	var s redisStats
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			s.commands, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case "cmdstat_subscribe", "cmdstat_unsubscribe", "cmdstat_psubscribe", "cmdstat_punsubscribe",
			"cmdstat_ssubscribe", "cmdstat_sunsubscribe":
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseInt(calls, 10, 64)
			s.subs += n
		}
	}
	return s, nil
}

// table accumulates one markdown table.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "\n### %s\n\n", t.title)
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.head, " | "))
	seps := make([]string, len(t.head))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "---:"
		}
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(seps, " | "))
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	if len(t.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range t.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

package engine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// asyncLogger hands records to the application's logger on a goroutine of
// its own, through a bounded queue: a handler that blocks (a full stderr
// pipe, a slow network sink) can delay only its own records, never the end
// of a lease. When the queue is full, records are dropped and counted.
type asyncLogger struct {
	l       *slog.Logger
	ch      chan logRecord
	dropped atomic.Int64
	done    chan struct{}

	mu     sync.RWMutex // read-held while sending, so close cannot race a send
	closed bool
}

type logRecord struct {
	level slog.Level
	msg   string
	args  []any
}

const logQueue = 256

// logCloseWait bounds how long Close waits for a blocked handler.
const logCloseWait = time.Second

func newAsyncLogger(l *slog.Logger) *asyncLogger {
	a := &asyncLogger{l: l, ch: make(chan logRecord, logQueue), done: make(chan struct{})}
	go a.run()
	return a
}

func (a *asyncLogger) warn(msg string, args ...any)  { a.log(slog.LevelWarn, msg, args) }
func (a *asyncLogger) debug(msg string, args ...any) { a.log(slog.LevelDebug, msg, args) }

func (a *asyncLogger) log(level slog.Level, msg string, args []any) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return
	}
	select {
	case a.ch <- logRecord{level, msg, args}:
	default:
		a.dropped.Add(1)
	}
}

func (a *asyncLogger) run() {
	defer close(a.done)
	for r := range a.ch {
		if n := a.dropped.Swap(0); n > 0 {
			a.l.Warn("dlock: log records dropped: the handler was too slow", "dropped", n)
		}
		a.l.Log(context.Background(), r.level, r.msg, r.args...)
	}
}

// close flushes the queue, waiting at most logCloseWait for the handler.
func (a *asyncLogger) close() {
	a.mu.Lock()
	a.closed = true
	close(a.ch)
	a.mu.Unlock()
	select {
	case <-a.done:
	case <-time.After(logCloseWait):
	}
}

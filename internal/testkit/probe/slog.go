// Package probe has helpers shared by dlock's test packages: a slog
// handler that blocks, a goroutine counter, and the A/B rounds of the
// benchmarks that compare two paths (Versus).
package probe

import (
	"context"
	"log/slog"
)

// Blocking is a handler whose writes block until Release is closed, like a
// logger writing to a full stderr pipe.
type Blocking struct{ Release chan struct{} }

// NewBlocking returns a Blocking handler; close its Release channel to
// unblock every write.
func NewBlocking() Blocking { return Blocking{Release: make(chan struct{})} }

// Enabled reports true for every level.
func (h Blocking) Enabled(context.Context, slog.Level) bool { return true }

// Handle blocks until Release is closed.
func (h Blocking) Handle(context.Context, slog.Record) error {
	<-h.Release
	return nil
}

// WithAttrs returns h.
func (h Blocking) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h Blocking) WithGroup(string) slog.Handler { return h }

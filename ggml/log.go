package ggml

import (
	"context"
	"log/slog"
	"sync"

	"github.com/ggload/ggload/bindings"
)

// The native libraries have one log for the whole process. It goes to the
// Logger of every open Runtime (each distinct one once); a Runtime opened
// without one adds the quiet default, which passes warnings and errors to
// slog.Default() and drops the rest. With no Runtime open the default holds.

var (
	logMu    sync.Mutex
	logUsers = map[*slog.Logger]int{} // nil: the quiet default
)

func init() { bindings.SetLogger(slog.New(quietHandler{})) }

func addLogger(l *slog.Logger) {
	logMu.Lock()
	defer logMu.Unlock()
	logUsers[l]++
	routeLog()
}

func removeLogger(l *slog.Logger) {
	logMu.Lock()
	defer logMu.Unlock()
	if logUsers[l]--; logUsers[l] <= 0 {
		delete(logUsers, l)
	}
	routeLog()
}

// routeLog points the native log at the open runtimes' loggers.
func routeLog() {
	var hs fanout
	quiet := len(logUsers) == 0
	for l := range logUsers {
		if l == nil {
			quiet = true
		} else {
			hs = append(hs, l.Handler())
		}
	}
	if quiet {
		hs = append(hs, quietHandler{})
	}
	if len(hs) == 1 {
		bindings.SetLogger(slog.New(hs[0]))
		return
	}
	bindings.SetLogger(slog.New(hs))
}

// quietHandler passes warnings and errors to slog.Default(), as it is when
// the record arrives.
type quietHandler struct{}

func (quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (quietHandler) Handle(ctx context.Context, r slog.Record) error {
	return slog.Default().Handler().Handle(ctx, r)
}

func (q quietHandler) WithAttrs([]slog.Attr) slog.Handler { return q }
func (q quietHandler) WithGroup(string) slog.Handler      { return q }

// fanout sends a record to several handlers.
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range f {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	var first error
	for _, h := range f {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

func (f fanout) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}

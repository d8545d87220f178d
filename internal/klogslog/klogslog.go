// Package klogslog sends what client-go logs through klog to a command's
// slog logger, so that those lines carry the command's attributes and
// keep to its level instead of going to stderr at every level in klog's
// own format.
package klogslog

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"
)

var (
	once   sync.Once
	target atomic.Pointer[slog.Logger]
)

// Install makes klog write through the logger Use last named (until
// then, a text logger on stderr). Call it first in main — and in a TestMain —
// before anything logs through klog: klog's own setter is not safe
// beside goroutines that log, which a command's tests leave running when
// they call its run again.
func Install() {
	once.Do(func() { klog.SetSlogLogger(slog.New(handler{})) })
}

// Use names the logger klog writes through from now on (Install); it
// may be called at any time.
func Use(log *slog.Logger) { target.Store(log) }

func logger() *slog.Logger {
	if l := target.Load(); l != nil {
		return l
	}
	// Until Use names one: stderr as it is now, where klog itself wrote.
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// handler hands every record to the logger Use last stored, with the
// attributes and groups added to it on the way (ops, in order).
type handler struct {
	ops []func(slog.Handler) slog.Handler
}

func (h handler) current() slog.Handler {
	out := logger().Handler()
	for _, op := range h.ops {
		out = op(out)
	}
	return out
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return logger().Handler().Enabled(ctx, l)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	// The logger may have been swapped since Enabled was asked.
	out := h.current()
	if !out.Enabled(ctx, r.Level) {
		return nil
	}
	return out.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(s slog.Handler) slog.Handler { return s.WithAttrs(attrs) })
}

func (h handler) WithGroup(name string) slog.Handler {
	return h.with(func(s slog.Handler) slog.Handler { return s.WithGroup(name) })
}

func (h handler) with(op func(slog.Handler) slog.Handler) handler {
	return handler{ops: append(h.ops[:len(h.ops):len(h.ops)], op)}
}

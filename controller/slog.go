package controller

import (
	"context"
	"io"
	"log"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// NewSlogLogger returns an hclog.Logger that writes through l, so that a
// program logging with log/slog can hand its logger to NewManager (and to
// WithLogger, or the reconcilers' Runtime.Logger reads it). hclog stays the
// Manager's default.
//
// Levels map to slog's (Trace is slog.LevelDebug-4) and are enabled as l's
// handler says; SetLevel adds a floor of its own on top. A logger's name
// (Named) is the record's "logger" attribute; With's arguments are slog
// attributes as they are for slog.Logger.With.
func NewSlogLogger(l *slog.Logger) hclog.Logger {
	return &slogLogger{handler: l.Handler(), floor: new(atomic.Int32)}
}

// slogLogger adapts a slog.Handler to hclog.Logger.
type slogLogger struct {
	handler slog.Handler
	name    string
	implied []any
	// floor is the level set by SetLevel (hclog.NoLevel: none), shared
	// with the loggers derived from this one, as hclog's are.
	floor *atomic.Int32
}

// slogLevel maps an hclog level to slog's.
func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (l *slogLogger) enabled(level hclog.Level) bool {
	if level == hclog.Off {
		return false
	}
	if floor := hclog.Level(l.floor.Load()); floor != hclog.NoLevel && level != hclog.NoLevel && level < floor {
		return false
	}
	return l.handler.Enabled(context.Background(), slogLevel(level))
}

// Log writes msg with args (key, value pairs) at level, naming its caller
// as the record's source.
func (l *slogLogger) Log(level hclog.Level, msg string, args ...any) { l.log(level, msg, args) }

func (l *slogLogger) log(level hclog.Level, msg string, args []any) {
	if !l.enabled(level) {
		return
	}
	r := slog.NewRecord(time.Now(), slogLevel(level), msg, callerPC())
	if l.name != "" {
		r.AddAttrs(slog.String("logger", l.name))
	}
	r.Add(args...)
	_ = l.handler.Handle(context.Background(), r)
}

// callerPC returns the program counter of the code that logged: the first
// caller outside this adapter and the reconcile's request logger, which
// wraps it.
func callerPC() uintptr {
	var pcs [8]uintptr
	n := runtime.Callers(3, pcs[:]) // runtime.Callers, callerPC, log
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/loomrt/loom/controller.(*slogLogger)") &&
			!strings.HasPrefix(f.Function, "github.com/loomrt/loom/controller.(*requestLogger)") {
			return f.PC
		}
		if !more {
			return 0
		}
	}
}

func (l *slogLogger) Trace(msg string, args ...any) { l.log(hclog.Trace, msg, args) }
func (l *slogLogger) Debug(msg string, args ...any) { l.log(hclog.Debug, msg, args) }
func (l *slogLogger) Info(msg string, args ...any)  { l.log(hclog.Info, msg, args) }
func (l *slogLogger) Warn(msg string, args ...any)  { l.log(hclog.Warn, msg, args) }
func (l *slogLogger) Error(msg string, args ...any) { l.log(hclog.Error, msg, args) }

func (l *slogLogger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *slogLogger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *slogLogger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *slogLogger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *slogLogger) IsError() bool { return l.enabled(hclog.Error) }

// ImpliedArgs returns the arguments given to With on the way to l.
func (l *slogLogger) ImpliedArgs() []any { return append([]any(nil), l.implied...) }

// With returns a logger that adds args to every record.
func (l *slogLogger) With(args ...any) hclog.Logger {
	out := *l
	out.handler = l.handler.WithAttrs(argsToAttrs(args))
	out.implied = append(append([]any(nil), l.implied...), args...)
	return &out
}

// argsToAttrs turns key, value pairs into attributes as slog.Logger.With
// does (a lone or non-string key becomes "!BADKEY").
func argsToAttrs(args []any) []slog.Attr {
	var r slog.Record
	r.Add(args...)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	return attrs
}

func (l *slogLogger) Name() string { return l.name }

// Named returns a logger whose name is l's with name appended ("a.b").
func (l *slogLogger) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return l.ResetNamed(name)
}

// ResetNamed returns a logger called name.
func (l *slogLogger) ResetNamed(name string) hclog.Logger {
	out := *l
	out.name = name
	return &out
}

// SetLevel sets a floor below which nothing is written, above whatever l's
// handler enables, for l and the loggers derived from it.
func (l *slogLogger) SetLevel(level hclog.Level) { l.floor.Store(int32(level)) }

// GetLevel returns the lowest level l writes.
func (l *slogLogger) GetLevel() hclog.Level {
	for level := hclog.Trace; level <= hclog.Error; level++ {
		if l.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

// StandardLogger returns a *log.Logger writing through l at Info, or at
// opts.ForceLevel when it is set.
func (l *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	h := l.handler
	if l.name != "" {
		h = h.WithAttrs([]slog.Attr{slog.String("logger", l.name)})
	}
	return slog.NewLogLogger(h, slogLevel(level))
}

// StandardWriter returns the writer of StandardLogger(opts).
func (l *slogLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.StandardLogger(opts).Writer()
}

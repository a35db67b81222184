package controller

import (
	"io"
	"log"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// requestLogger is the Runtime.Logger of one reconcile: the controller's
// logger (which carries the "controller" field) with the request's key,
// "partition/namespace/name", as the "request" field, as the framework's
// own reconcile-failure message names it.
//
// hclog's With allocates a logger and its arguments, so it is built only
// when the reconciler first logs at an enabled level or derives a logger
// (With, Named, ...); a reconcile that logs nothing costs this one small
// struct. Level checks, Name, GetLevel and SetLevel go to the controller's
// logger (SetLevel changes it, as it would through a With-logger).
type requestLogger struct {
	hclog.Logger                // the controller's logger
	id           *pbresource.ID // the request's; its key is rendered only when needed
	// gate: skip building the With-logger for a message below the
	// controller logger's level. Off for an InterceptLogger, whose sinks
	// may want messages below its own level.
	gate bool
	once sync.Once
	with hclog.Logger
}

func newRequestLogger(base hclog.Logger, req reconcile.Request) *requestLogger {
	l := new(requestLogger)
	l.init(base, req)
	return l
}

// init makes l, which is new, the logger of req.
func (l *requestLogger) init(base hclog.Logger, req reconcile.Request) {
	_, intercept := base.(hclog.InterceptLogger)
	l.Logger, l.id, l.gate = base, req.ID, !intercept
}

func (l *requestLogger) get() hclog.Logger {
	l.once.Do(func() {
		l.with = l.Logger.With("request", reconcile.Request{ID: l.id}.Key().String())
	})
	return l.with
}

func (l *requestLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	if l.gate && level != hclog.NoLevel && level < l.Logger.GetLevel() {
		return
	}
	l.get().Log(level, msg, args...)
}

func (l *requestLogger) Trace(msg string, args ...interface{}) {
	if !l.gate || l.Logger.IsTrace() {
		l.get().Trace(msg, args...)
	}
}

func (l *requestLogger) Debug(msg string, args ...interface{}) {
	if !l.gate || l.Logger.IsDebug() {
		l.get().Debug(msg, args...)
	}
}

func (l *requestLogger) Info(msg string, args ...interface{}) {
	if !l.gate || l.Logger.IsInfo() {
		l.get().Info(msg, args...)
	}
}

func (l *requestLogger) Warn(msg string, args ...interface{}) {
	if !l.gate || l.Logger.IsWarn() {
		l.get().Warn(msg, args...)
	}
}

func (l *requestLogger) Error(msg string, args ...interface{}) {
	if !l.gate || l.Logger.IsError() {
		l.get().Error(msg, args...)
	}
}

func (l *requestLogger) ImpliedArgs() []interface{} { return l.get().ImpliedArgs() }

func (l *requestLogger) With(args ...interface{}) hclog.Logger { return l.get().With(args...) }

func (l *requestLogger) Named(name string) hclog.Logger { return l.get().Named(name) }

func (l *requestLogger) ResetNamed(name string) hclog.Logger { return l.get().ResetNamed(name) }

func (l *requestLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return l.get().StandardLogger(opts)
}

func (l *requestLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.get().StandardWriter(opts)
}

// runtimeFor returns the Runtime of one reconcile of req: the worker's,
// with a logger that names the request. Its client is the worker's
// writeRecorder.
func (w *worker) runtimeFor(req reconcile.Request) reconcile.Runtime {
	rt := w.rt
	rt.Logger = w.loggers.next(w.logger, req)
	return rt
}

// requestLoggers hands out the request loggers of one worker from slabs,
// one allocation per slab instead of one per reconcile. Each logger is
// used once, so a reconciler may keep its logger past the reconcile (a
// kept logger keeps its slab alive: a few kilobytes). Only the worker
// touches it.
type requestLoggers struct {
	slab []requestLogger
}

// loggerSlab is how many request loggers a slab holds.
const loggerSlab = 32

func (ls *requestLoggers) next(base hclog.Logger, req reconcile.Request) *requestLogger {
	if len(ls.slab) == 0 {
		ls.slab = make([]requestLogger, loggerSlab)
	}
	l := &ls.slab[0]
	ls.slab = ls.slab[1:]
	l.init(base, req)
	return l
}

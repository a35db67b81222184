// Package daemon holds what Loom's long-running commands (package host's
// server, package remote's controller process) share: the exit codes and
// signal handling of their main, the error for a mistake in their command
// line, and the server of their HTTP endpoints.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/internal/connlimit"
	"github.com/loomrt/loom/observe"
)

// UsageError is a mistake in the command line: Main exits with status 2
// on one.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Main calls run with a context that ends at the first SIGINT or SIGTERM
// (a second one gets the default handling, so it ends a shutdown that
// takes too long), and exits: status 0 when run returns nil or
// flag.ErrHelp, 2 after a UsageError (with a pointer to -h), 1 after any
// other error, which it prints prefixed with name.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx)
	stop()
	var usage UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usage):
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

const (
	// DefaultMaxHTTPConns is the most connections the HTTP endpoints hold
	// open at a time unless told otherwise (the host's -max-http-conns):
	// ample for probes, scrapes and profiles, few enough to leave the
	// process its file descriptors.
	DefaultMaxHTTPConns = 128
	// httpReadHeaderTimeout bounds how long a request's header may take to
	// arrive; httpIdleTimeout how long a keep-alive connection waits for
	// its next request. (Responses have their deadline per request: see
	// package observe.)
	httpReadHeaderTimeout = 10 * time.Second
	httpIdleTimeout       = 2 * time.Minute
)

// HTTPServer serves the observe endpoints (/metrics, /healthz, /readyz,
// pprof) on a listener of its own, holding at most its own bound of
// connections open: when they are all in use, a new one takes the place of
// the longest-idle keep-alive connection, or is refused when none is idle
// (see package connlimit). Whatever the gRPC side holds, /healthz still
// answers.
type HTTPServer struct {
	srv  *http.Server
	lis  *connlimit.Listener
	tls  *tls.Config // nil: plaintext
	done chan error
}

// ListenHTTP listens on addr (the -http-addr flag's value) for an
// observe.NewHandler(opts...), holding at most maxConns connections open.
// It returns nil, and no error, when addr is empty: the endpoints are off.
func ListenHTTP(addr string, maxConns int, opts ...observe.Option) (*HTTPServer, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			err = fmt.Errorf("%w (choose another -http-addr, or -http-addr '' to turn the HTTP endpoints off)", err)
		}
		return nil, fmt.Errorf("-http-addr: %w", err)
	}
	limited := connlimit.NewListener(lis, maxConns)
	return &HTTPServer{
		srv: &http.Server{
			Handler:           observe.NewHandler(opts...),
			ReadHeaderTimeout: httpReadHeaderTimeout,
			IdleTimeout:       httpIdleTimeout,
			// A connection that has not begun a request may make room for
			// a new one; one in the middle of a request may not.
			ConnState: func(c net.Conn, s http.ConnState) {
				if tc, ok := c.(*tls.Conn); ok {
					c = tc.NetConn() // the connection the listener counts
				}
				limited.SetIdle(c, s == http.StateNew || s == http.StateIdle)
			},
		},
		lis:  limited,
		done: make(chan error, 1),
	}, nil
}

// Conns returns the listener that bounds the server's connections, for
// its metrics (connlimit.Collector).
func (h *HTTPServer) Conns() *connlimit.Listener { return h.lis }

// Addr returns the address it listens on, the port chosen when addr asked
// for port 0.
func (h *HTTPServer) Addr() string { return h.lis.Addr().String() }

// UseTLS makes Serve serve HTTPS with cfg (the handshake within the
// request header's deadline). Call it before Serve.
func (h *HTTPServer) UseTLS(cfg *tls.Config) { h.tls = cfg }

// Serve serves in the background until Stop.
func (h *HTTPServer) Serve(logger hclog.Logger) {
	var lis net.Listener = h.lis
	if h.tls != nil {
		lis = tls.NewListener(h.lis, h.tls)
	}
	// Failed handshakes (scanners, plaintext clients) at debug level.
	h.srv.ErrorLog = logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug})
	logger.Info("HTTP server listening", "addr", h.Addr(), "tls", h.tls != nil)
	go func() {
		err := h.srv.Serve(lis)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		h.done <- err
	}()
}

// Stop shuts the server down, letting a scrape in flight finish within
// timeout, and waits until it has stopped.
func (h *HTTPServer) Stop(timeout time.Duration, logger hclog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	if err := <-h.done; err != nil {
		logger.Error("HTTP server", "error", err)
	}
}

// Parse parses args with fs, which takes no arguments but flags: -h is
// flag.ErrHelp, any other mistake a UsageError.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// DefaultReloadInterval is how often files are checked for changes unless
// told otherwise (-reload-interval).
const DefaultReloadInterval = 5 * time.Second

// WatchToken reads a token from path as ReadToken does, and again every
// interval until ctx ends. The function it returns gives the token in
// force: a changed token replaces it (logged, never the token itself); a
// file that cannot be read or is empty leaves it in force and is logged,
// once until the error changes.
func WatchToken(ctx context.Context, name, path string, every time.Duration, logger hclog.Logger) (func() string, error) {
	token, err := ReadToken(name, path)
	if err != nil {
		return nil, err
	}
	var current atomic.Pointer[string]
	current.Store(&token)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		var lastErr string
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			next, err := ReadToken(name, path)
			switch {
			case err != nil:
				if msg := err.Error(); msg != lastErr {
					lastErr = msg
					logger.Error("token file not reloaded; the previous token stays in force", "error", err)
				}
				continue
			case next != *current.Load():
				current.Store(&next)
				logger.Info("token file reloaded", "flag", "-"+name, "file", path)
			}
			lastErr = ""
		}
	}()
	return func() string { return *current.Load() }, nil
}

// ReadToken reads a token from path, the value of the flag named name,
// trimmed of surrounding space: an error names the flag, and an empty
// file is one.
func ReadToken(name, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("-%s: %w", name, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("-%s: %s is empty", name, path)
	}
	return token, nil
}

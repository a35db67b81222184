// Package observe serves a host's HTTP endpoints for operators: Prometheus
// metrics (/metrics), a liveness probe (/healthz), a readiness probe
// (/readyz) and, when asked for, Go's profiler (/debug/pprof/).
//
// /healthz answers 200 while the process serves HTTP at all. /readyz runs
// every readiness check (each within a deadline) and answers 200 "ok" when
// all pass, or 503 with one line naming the first that failed and why.
package observe

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultCheckTimeout bounds each readiness check unless WithCheckTimeout
// says otherwise.
const DefaultCheckTimeout = 2 * time.Second

// Option configures NewHandler.
type Option func(*config)

type config struct {
	gatherer prometheus.Gatherer
	checks   []check
	timeout  time.Duration
	pprof    bool
}

type check struct {
	name string
	fn   func(context.Context) error
}

// WithMetrics serves g's metrics on /metrics.
func WithMetrics(g prometheus.Gatherer) Option { return func(c *config) { c.gatherer = g } }

// WithReadiness adds a readiness check: /readyz fails while fn returns an
// error (or takes longer than the check timeout). Checks run in the order
// added.
func WithReadiness(name string, fn func(context.Context) error) Option {
	return func(c *config) { c.checks = append(c.checks, check{name, fn}) }
}

// WithCheckTimeout sets how long a readiness check may take.
func WithCheckTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithPprof serves Go's profiler under /debug/pprof/. Leave it off unless
// the endpoint is private: profiles reveal a lot about a process.
func WithPprof() Option { return func(c *config) { c.pprof = true } }

// NewHandler returns the handler of the endpoints the options turn on
// (/healthz and /readyz always).
func NewHandler(opts ...Option) http.Handler {
	c := config{timeout: DefaultCheckTimeout}
	for _, o := range opts {
		o(&c)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	checks, timeout := c.checks, c.timeout
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		for _, ck := range checks {
			if err := run(r.Context(), ck, timeout); err != nil {
				http.Error(w, fmt.Sprintf("not ready: %s: %v", ck.name, err), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	if c.gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(c.gatherer, promhttp.HandlerOpts{}))
	}
	if c.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// run runs one check within timeout; a check that overruns fails even if
// it ignores its context.
func run(ctx context.Context, ck check, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ck.fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", timeout)
	}
}

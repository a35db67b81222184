// Package observe serves a host's HTTP endpoints for operators: Prometheus
// metrics (/metrics), a liveness probe (/healthz), a readiness probe
// (/readyz) and, when asked for, Go's profiler (/debug/pprof/).
//
// /healthz answers 200 while the process serves HTTP at all. /readyz runs
// every readiness check (each within a deadline) and answers 200 "ok" when
// all pass, or 503 with one line naming the first that failed and why;
// either way, status lines follow (WithStatus), e.g. "leader: leading".
//
// Every response must be written within a deadline (DefaultWriteTimeout),
// so that a client that stops reading does not hold its connection; a
// profile or trace gets its duration on top. The deadline is set per
// request rather than as the http.Server's WriteTimeout, which would make
// net/http/pprof refuse profiles longer than it.
package observe

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	// DefaultCheckTimeout bounds each readiness check unless
	// WithCheckTimeout says otherwise.
	DefaultCheckTimeout = 2 * time.Second
	// DefaultWriteTimeout is how long a response may take to write unless
	// WithWriteTimeout says otherwise.
	DefaultWriteTimeout = time.Minute
	// defaultProfileSeconds is net/http/pprof's profile duration when the
	// request names none (a trace's is shorter).
	defaultProfileSeconds = 30
)

// Option configures NewHandler.
type Option func(*config)

type config struct {
	gatherer prometheus.Gatherer
	checks   []check
	statuses []status
	timeout  time.Duration
	write    time.Duration
	pprof    bool
	token    func() string
	handlers []handler
}

type handler struct {
	pattern string
	h       http.Handler
}

type check struct {
	name string
	fn   func(context.Context) error
}

type status struct {
	name string
	fn   func() string
}

// WithMetrics serves g's metrics on /metrics.
func WithMetrics(g prometheus.Gatherer) Option { return func(c *config) { c.gatherer = g } }

// WithReadiness adds a readiness check: /readyz fails while fn returns an
// error (or takes longer than the check timeout). Checks run in the order
// added.
func WithReadiness(name string, fn func(context.Context) error) Option {
	return func(c *config) { c.checks = append(c.checks, check{name, fn}) }
}

// WithStatus adds a line "name: value" to every /readyz answer, ready or
// not, below the verdict, where value is what fn returns at the request
// (each run of white space, newlines included, becomes one space, so it
// stays one line). fn must be quick: it runs without a deadline. Status
// lines inform; they never change the answer's code. Lines come in the
// order added.
func WithStatus(name string, fn func() string) Option {
	return func(c *config) { c.statuses = append(c.statuses, status{name, fn}) }
}

// WithCheckTimeout sets how long a readiness check may take.
func WithCheckTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithWriteTimeout sets how long a response may take to write before its
// connection is closed (a profile or trace: its duration plus d).
func WithWriteTimeout(d time.Duration) Option { return func(c *config) { c.write = d } }

// WithPprof serves Go's profiler under /debug/pprof/. Leave it off unless
// the endpoint is private: profiles reveal a lot about a process.
func WithPprof() Option { return func(c *config) { c.pprof = true } }

// WithBearerToken makes /metrics and the profiler answer only requests
// with the header "Authorization: Bearer <token>" (401 otherwise, with
// nothing of the token in the answer), where token is the one token() returns
// at the request (so it may change while the handler serves). /healthz and
// /readyz stay open, for probes.
func WithBearerToken(token func() string) Option { return func(c *config) { c.token = token } }

// NewHandler returns the handler of the endpoints the options turn on
// (/healthz and /readyz always).
func NewHandler(opts ...Option) http.Handler {
	c := config{timeout: DefaultCheckTimeout, write: DefaultWriteTimeout}
	for _, o := range opts {
		o(&c)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	checks, statuses, timeout := c.checks, c.statuses, c.timeout
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		for _, ck := range checks {
			if err := run(r.Context(), ck, timeout); err != nil {
				// http.Error ends the text with a newline.
				http.Error(w, fmt.Sprintf("not ready: %s: %v", ck.name, err)+statusLines(statuses, "\n", ""), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprint(w, "ok\n"+statusLines(statuses, "", "\n"))
	})
	private := func(h http.Handler) http.Handler { return h }
	if c.token != nil {
		private = func(h http.Handler) http.Handler { return requireToken(c.token, h) }
	}
	if c.gatherer != nil {
		mux.Handle("GET /metrics", private(promhttp.HandlerFor(c.gatherer, promhttp.HandlerOpts{})))
	}
	if c.pprof {
		mux.Handle("/debug/pprof/", private(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", private(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", private(forDuration(pprof.Profile, c.write)))
		mux.Handle("/debug/pprof/symbol", private(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", private(forDuration(pprof.Trace, c.write)))
	}
	for _, h := range c.handlers {
		mux.Handle(h.pattern, h.h)
	}
	write := c.write
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setWriteDeadline(w, write)
		mux.ServeHTTP(w, r)
	})
}

// statusLines renders the status lines, each "name: value" with before
// and after it.
func statusLines(statuses []status, before, after string) string {
	var b strings.Builder
	for _, st := range statuses {
		b.WriteString(before)
		b.WriteString(st.name)
		b.WriteString(": ")
		b.WriteString(strings.Join(strings.Fields(st.fn()), " "))
		b.WriteString(after)
	}
	return b.String()
}

// requireToken serves h to requests that carry "Authorization: Bearer
// <token()>", compared in constant time, and 401 to the others.
func requireToken(token func() string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const scheme = "Bearer "
		auth := r.Header.Get("Authorization")
		if len(auth) < len(scheme) || !strings.EqualFold(auth[:len(scheme)], scheme) ||
			subtle.ConstantTimeCompare([]byte(auth[len(scheme):]), []byte(token())) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
			http.Error(w, "unauthorized: send the token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// forDuration moves the write deadline of a profile or trace past the
// duration its request asks for (the "seconds" parameter).
func forDuration(h http.HandlerFunc, write time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sec, err := strconv.ParseInt(r.FormValue("seconds"), 10, 64)
		if err != nil || sec <= 0 {
			sec = defaultProfileSeconds
		}
		setWriteDeadline(w, time.Duration(sec)*time.Second+write)
		h(w, r)
	}
}

// setWriteDeadline gives the response d to be written; where the writer
// cannot have a deadline (a test's recorder), it has none.
func setWriteDeadline(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
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

// WithHandler serves h for the requests that match pattern (a
// net/http.ServeMux pattern, e.g. "/ui/"), beside the endpoints. h is not
// behind WithBearerToken's token (it checks its callers itself); its
// responses get the write deadline, which a long stream moves on as it
// writes (net/http.ResponseController).
func WithHandler(pattern string, h http.Handler) Option {
	return func(c *config) { c.handlers = append(c.handlers, handler{pattern, h}) }
}

package observe_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/observe"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "loom_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Inc()
	var primed atomic.Bool
	h := observe.NewHandler(
		observe.WithMetrics(reg),
		observe.WithReadiness("storage", func(context.Context) error { return nil }),
		observe.WithReadiness("cache", func(context.Context) error {
			if !primed.Load() {
				return errors.New("caches not primed")
			}
			return nil
		}),
	)

	code, body := get(t, h, "/healthz")
	assert.Equal(t, http.StatusOK, code)
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready: cache: caches not primed\n", body)
	primed.Store(true)
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	code, body = get(t, h, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "loom_test_total 1")

	code, _ = get(t, h, "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "pprof is off unless asked for")
	code, body = get(t, observe.NewHandler(observe.WithPprof()), "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.Contains(body, "goroutine"))
	code, _ = get(t, observe.NewHandler(), "/metrics")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestReadinessCheckThatHangsFails(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := observe.NewHandler(observe.WithCheckTimeout(50*time.Millisecond), observe.WithReadiness("stuck", func(context.Context) error {
		<-release // ignores its context
		return nil
	}))
	code, body := get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "not ready: stuck: no answer within")
}

// TestStalledReaderIsCutOff: a client that asks for a response and stops
// reading it loses its connection once the write timeout has passed,
// while a profile longer than that timeout is still served.
func TestStalledReaderIsCutOff(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Far more than the socket buffers hold, so the write blocks.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "loom_test_big", Help: strings.Repeat("x", 32<<20)}))
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(observe.NewHandler(observe.WithMetrics(reg), observe.WithPprof(),
		observe.WithWriteTimeout(time.Second)))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() }) // before srv.Close
	_, err = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: loom\r\n\r\n")
	require.NoError(t, err)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection of a client that stopped reading was still open after 10s")
	}

	// A two-second profile outlasts the timeout and is served whole.
	rsp, err := http.Get(srv.URL + "/debug/pprof/profile?seconds=2")
	require.NoError(t, err)
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, rsp.StatusCode, string(body))
	assert.NotEmpty(t, body)
}

// TestBearerToken: with a token, /metrics and pprof answer only requests
// bearing it; the probes stay open.
func TestBearerToken(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "loom_test_total", Help: "A test counter."}))
	h := observe.NewHandler(observe.WithMetrics(reg), observe.WithPprof(), observe.WithBearerToken(func() string { return "s3cret" }))
	do := func(path, auth string) (int, string, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String(), rec.Header().Get("WWW-Authenticate")
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/cmdline"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cre", "Basic s3cret", "Bearer s3cret2"} {
			code, body, challenge := do(path, auth)
			assert.Equal(t, http.StatusUnauthorized, code, "%s with %q", path, auth)
			assert.Equal(t, `Bearer realm="loom"`, challenge)
			assert.NotContains(t, body, "s3cret")
		}
		code, _, _ := do(path, "Bearer s3cret")
		assert.Equal(t, http.StatusOK, code, "%s with the token", path)
	}
	_, body, _ := do("/metrics", "bearer s3cret") // the scheme is case-insensitive
	assert.Contains(t, body, "loom_test_total 0")
	for _, path := range []string{"/healthz", "/readyz"} {
		code, _, _ := do(path, "")
		assert.Equal(t, http.StatusOK, code, "%s without a token", path)
	}
}

// TestWithHandler checks that a handler added with WithHandler serves its
// paths, outside the bearer token that guards /metrics.
func TestWithHandler(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console "+r.URL.Path) })
	h := observe.NewHandler(observe.WithMetrics(prometheus.NewRegistry()),
		observe.WithBearerToken(func() string { return "secret" }), observe.WithHandler("/ui/", ui))
	code, body := get(t, h, "/ui/x")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "console /ui/x", body)
	code, _ = get(t, h, "/metrics")
	assert.Equal(t, http.StatusUnauthorized, code)
}

// TestStatusLines: status lines follow the verdict of /readyz, ready or
// not, with the value at the request, and leave the code alone.
func TestStatusLines(t *testing.T) {
	var ready atomic.Bool
	var leader atomic.Value
	leader.Store("following (warm)")
	h := observe.NewHandler(
		observe.WithReadiness("cache", func(context.Context) error {
			if !ready.Load() {
				return errors.New("not primed")
			}
			return nil
		}),
		observe.WithStatus("leader", func() string { return leader.Load().(string) }),
		observe.WithStatus("note", func() string { return "two\nlines " }),
	)
	code, body := get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready: cache: not primed\nleader: following (warm)\nnote: two lines\n", body)

	ready.Store(true)
	leader.Store("leading")
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\nleader: leading\nnote: two lines\n", body)

	// Without status lines, the answers are as before.
	code, body = get(t, observe.NewHandler(), "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
}

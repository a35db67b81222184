package observe_test

import (
	"context"
	"errors"
	"io"
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

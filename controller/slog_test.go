package controller_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slogRecords parses the JSON records a slog.JSONHandler wrote to b.
func slogRecords(t *testing.T, b *testlog.Buffer) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out[m["msg"].(string)] = m
	}
	return out
}

func TestSlogLoggerAsManagerLogger(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "a", "x", nil)
	out := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo, AddSource: true}))

	m, err := controller.NewManager(svc.Client, controller.NewSlogLogger(logger))
	require.NoError(t, err)
	var done counter
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			rt.Logger.Debug("below the level")
			rt.Logger.Info("reconciling", "k", "v")
			rt.Logger.Named("sub").Warn("derived")
			done.inc(req.ID.Name)
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool { return done.get("a") > 0 }, 5*time.Second, time.Millisecond)

	recs := slogRecords(t, out)
	assert.NotContains(t, recs, "below the level")
	require.Contains(t, recs, "reconciling")
	r := recs["reconciling"]
	assert.Equal(t, "INFO", r["level"])
	assert.Equal(t, "bar", r["controller"])
	assert.Equal(t, "default/default/a", r["request"])
	assert.Equal(t, "v", r["k"])
	// The source is the reconciler's line, not the adapter's.
	assert.Contains(t, r["source"].(map[string]any)["file"], "slog_test.go")
	require.Contains(t, recs, "derived")
	assert.Equal(t, "WARN", recs["derived"]["level"])
	assert.Equal(t, "default/default/a", recs["derived"]["request"])
	assert.True(t, strings.HasSuffix(recs["derived"]["logger"].(string), "sub"), recs["derived"]["logger"])
}

func TestSlogLoggerLevels(t *testing.T) {
	out := &testlog.Buffer{}
	level := new(slog.LevelVar)
	level.Set(slog.LevelDebug)
	l := controller.NewSlogLogger(slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level})))
	assert.Equal(t, hclog.Debug, l.GetLevel())
	assert.True(t, l.IsDebug())
	assert.False(t, l.IsTrace())

	level.Set(slog.LevelWarn) // the handler's level is followed as it changes
	assert.Equal(t, hclog.Warn, l.GetLevel())
	assert.False(t, l.IsInfo())

	level.Set(slog.LevelDebug)
	named := l.Named("a").With("x", 1)
	l.SetLevel(hclog.Error) // a floor, shared with derived loggers as in hclog
	assert.Equal(t, hclog.Error, named.GetLevel())
	named.Warn("dropped")
	named.Error("kept", "y", 2)
	assert.Equal(t, []any{"x", 1}, named.ImpliedArgs())
	recs := slogRecords(t, out)
	assert.NotContains(t, recs, "dropped")
	require.Contains(t, recs, "kept")
	assert.Equal(t, "a", recs["kept"]["logger"])
	assert.EqualValues(t, 1, recs["kept"]["x"])
	assert.EqualValues(t, 2, recs["kept"]["y"])

	l.SetLevel(hclog.NoLevel)
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("from log")
	assert.Equal(t, "WARN", slogRecords(t, out)["from log"]["level"])
}

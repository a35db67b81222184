package controller_test

import (
	"context"
	"encoding/json"
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

// jsonLines parses the JSON log lines written to b so far.
func jsonLines(t *testing.T, b *testlog.Buffer) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestReconcileLoggerNamesControllerAndRequest(t *testing.T) {
	for _, viaWithLogger := range []bool{false, true} {
		name := "manager's logger"
		if viaWithLogger {
			name = "WithLogger"
		}
		t.Run(name, func(t *testing.T) {
			svc := startService(t)
			writeBar(t, svc.Client, "a", "x", nil)
			out := &testlog.Buffer{}
			logger := hclog.New(&hclog.LoggerOptions{Name: "test", Output: out, JSONFormat: true, Level: hclog.Info})

			var m *controller.Manager
			var err error
			c := controller.NewController("bar", foo.BarV1Type)
			if viaWithLogger {
				c.WithLogger(logger)
				m, err = controller.NewManager(svc.Client, nil)
			} else {
				m, err = controller.NewManager(svc.Client, logger)
			}
			require.NoError(t, err)
			var done counter
			c.WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
				rt.Logger.Debug("below the level")
				rt.Logger.Info("reconciling", "k", "v")
				rt.Logger.Named("sub").Warn("derived")
				done.inc(req.ID.Name)
				return nil
			}))
			m.MustRegister(c)
			m.SetLeader(true)
			runManager(t, m)
			require.Eventually(t, func() bool { return done.get("a") > 0 }, 5*time.Second, time.Millisecond)

			byMsg := map[string]map[string]any{}
			for _, l := range jsonLines(t, out) {
				byMsg[l["@message"].(string)] = l
			}
			assert.NotContains(t, byMsg, "below the level")
			require.Contains(t, byMsg, "reconciling")
			assert.Equal(t, "bar", byMsg["reconciling"]["controller"])
			assert.Equal(t, "default/default/a", byMsg["reconciling"]["request"])
			assert.Equal(t, "v", byMsg["reconciling"]["k"])
			require.Contains(t, byMsg, "derived")
			assert.Equal(t, "bar", byMsg["derived"]["controller"])
			assert.Equal(t, "default/default/a", byMsg["derived"]["request"])
			assert.True(t, strings.HasSuffix(byMsg["derived"]["@module"].(string), ".sub"), byMsg["derived"]["@module"])
		})
	}
}

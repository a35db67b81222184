package controller_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTerminalErrorWraps(t *testing.T) {
	cause := errors.New("invalid spec")
	err := fmt.Errorf("reconciling: %w", reconcile.TerminalError(cause))
	assert.True(t, reconcile.IsTerminalError(err))
	assert.ErrorIs(t, err, reconcile.TerminalError(nil), "matches as in controller-runtime")
	assert.ErrorIs(t, err, cause, "the cause stays reachable")
	assert.EqualError(t, err, "reconciling: terminal error: invalid spec")

	assert.False(t, reconcile.IsTerminalError(cause))
	assert.False(t, reconcile.IsTerminalError(nil))
	assert.NotErrorIs(t, cause, reconcile.TerminalError(nil))
	assert.False(t, reconcile.IsTerminalError(reconcile.RequeueNow()))
}

// A terminal error is counted and logged, but the request is not requeued.
// The proof does not wait for a retry that should not come: the controller
// has one worker, so once a later request has been reconciled, the worker
// has finished handling the terminal error, and the queue's counters say
// whether it re-queued anything.
func TestTerminalErrorIsCountedButNotRetried(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "doomed", "x", nil)

	reg := prometheus.NewRegistry()
	var calls counter
	m := newManager(t, svc.Client, controller.WithMetrics(reg))
	m.MustRegister(controller.NewController("terminal", foo.BarV1Type).
		WithConcurrency(1).
		WithBackoff(time.Millisecond, time.Millisecond).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			n := calls.inc(req.ID.Name)
			switch {
			case req.ID.Name != "doomed":
				return nil
			case n == 1:
				return errors.New("transient") // retried with backoff
			default:
				return fmt.Errorf("giving up: %w", reconcile.TerminalError(errors.New("invalid")))
			}
		})))
	m.SetLeader(true)
	runManager(t, m)

	// The transient error is retried; the retry fails terminally.
	require.Eventually(t, func() bool { return calls.get("doomed") == 2 }, 5*time.Second, time.Millisecond)
	// Reconciled after the worker is done with the terminal error.
	writeBar(t, svc.Client, "marker", "x", nil)
	require.Eventually(t, func() bool { return calls.get("marker") == 1 }, 5*time.Second, time.Millisecond)

	assert.Equal(t, 1.0, counterValue(t, reg, "workqueue_retries_total"), "only the transient error was retried")
	assert.Equal(t, 3.0, counterValue(t, reg, "workqueue_adds_total"), "doomed, its one retry, marker: nothing re-added doomed")
	assert.Equal(t, 2, calls.get("doomed"))
	assert.Equal(t, 1.0, counterValue(t, reg, "loom_controller_reconcile_total", "result", "terminal_error"))
	assert.Equal(t, 1.0, counterValue(t, reg, "loom_controller_reconcile_total", "result", "error"))
	assert.Equal(t, 2.0, counterValue(t, reg, "loom_controller_reconcile_errors_total"), "a terminal error is an error")

	// The next change reconciles it again.
	writeBar(t, svc.Client, "doomed", "changed", nil)
	require.Eventually(t, func() bool { return calls.get("doomed") == 3 }, 5*time.Second, time.Millisecond)
}

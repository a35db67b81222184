package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With WithResync, every managed resource is reconciled again every
// period without any change, the ones created after the start too; the
// reconciles of a round are spread over the period.
func TestResync(t *testing.T) {
	const period = 400 * time.Millisecond
	svc := startService(t)
	for _, n := range names(20, "bar") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	var calls counter
	var mu timesMu
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("resync", foo.BarV1Type).
		WithResync(period).
		WithReconciler(reconcile.ReconcileFunc(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request) error {
			if calls.inc(req.ID.Name) > 1 {
				mu.add(time.Now())
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool { return calls.total() >= 20 }, 10*time.Second, time.Millisecond)
	writeBar(t, svc.Client, "late", "x", nil)
	require.Eventually(t, func() bool {
		for _, n := range append(names(20, "bar"), "late") {
			if calls.get(n) < 3 {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond, "every resource is resynced, again and again")
	first, last := mu.span(20)
	assert.Greater(t, last.Sub(first), period/4, "the first 20 resyncs are spread, not a burst")
}

// A negative period is refused when the controller is registered.
func TestResyncValidation(t *testing.T) {
	m := newManager(t, startService(t).Client)
	err := m.Register(controller.NewController("c", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })).
		WithResync(-time.Second))
	require.ErrorContains(t, err, "WithResync")
}

// timesMu collects times, safely.
type timesMu struct {
	mu    sync.Mutex
	times []time.Time
}

func (tm *timesMu) add(at time.Time) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.times = append(tm.times, at)
}

// span returns the first and the n-th time collected.
func (tm *timesMu) span(n int) (time.Time, time.Time) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.times[0], tm.times[n-1]
}

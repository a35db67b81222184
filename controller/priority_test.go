package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The resources queued when a controller starts go in at low priority, a
// live change at normal: a resource written while the controller works
// through its start-up backlog is reconciled next, ahead of the backlog,
// and a requeue keeps that priority.
func TestFreshChangeBeforeStartUpBacklog(t *testing.T) {
	svc := startService(t)
	const backlog = 50
	for _, n := range names(backlog, "old") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	reg := prometheus.NewRegistry()
	m := newManager(t, svc.Client, controller.WithMetrics(reg))
	release := make(chan struct{})
	var requeues counter
	order := make(chan string, 2*backlog+10)
	m.MustRegister(controller.NewController("prio", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, _ reconcile.Runtime, req reconcile.Request) error {
			if len(order) == 0 {
				<-release // hold the one worker until the fresh write is queued
			}
			order <- req.ID.Name
			if req.ID.Name == "fresh" && requeues.inc("fresh") == 1 {
				return reconcile.RequeueNow()
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool {
		return gaugeValue(t, reg, "workqueue_depth", "low") == backlog-1
	}, 10*time.Second, time.Millisecond, "the start-up backlog waits at low priority")
	writeBar(t, svc.Client, "fresh", "x", nil)
	require.Eventually(t, func() bool {
		return gaugeValue(t, reg, "workqueue_depth", "normal") == 1
	}, 10*time.Second, time.Millisecond, "the fresh write waits at normal priority")
	close(release)

	first := <-order
	require.Equal(t, "fresh", <-order, "the fresh write goes before the backlog (after %s, which held the worker)", first)
	require.Equal(t, "fresh", <-order, "its requeue too")
}

// gaugeValue returns the value of the gauge name with priority=priority.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, priority string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "priority" && l.GetValue() == priority {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

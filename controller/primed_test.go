package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/require"
)

func TestWaitPrimed(t *testing.T) {
	svc := startService(t)
	for _, n := range names(20, "bar") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	writeZip(t, svc.Client, "zip")

	m := newManager(t, slowSnapshotClient{ResourceServiceClient: svc.Client, delays: map[string]time.Duration{
		"Bar": time.Millisecond,
	}})
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithWatch(foo.ZipType, func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
			return nil, nil
		}).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))

	// Not running yet: nothing is primed, so only the context ends the wait.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, m.WaitPrimed(cancelled), context.Canceled)
	require.False(t, m.Primed(), "primed before it ran")

	// Priming does not need the lease: this Manager is not the leader.
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))
	bars, err := m.Cache().All(foo.BarV1Type)
	require.NoError(t, err)
	require.Len(t, bars, 20, "every type is primed when WaitPrimed returns, the slow one too")
	zips, err := m.Cache().All(foo.ZipType)
	require.NoError(t, err)
	require.Len(t, zips, 1)
	require.NoError(t, m.WaitPrimed(ctx), "WaitPrimed returns at once once primed")
	require.True(t, m.Primed())
}

func TestWaitPrimedWithoutControllers(t *testing.T) {
	m := newManager(t, startService(t).Client)
	require.NoError(t, m.WaitPrimed(context.Background()))
	require.True(t, m.Primed())
}

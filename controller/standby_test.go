package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reconcileOrder records the names a controller reconciled, in order.
type reconcileOrder struct {
	mu    sync.Mutex
	names []string
}

func (r *reconcileOrder) reconciler() reconcile.Reconciler {
	return reconcile.ReconcileFunc(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request) error {
		r.mu.Lock()
		r.names = append(r.names, req.ID.Name)
		r.mu.Unlock()
		return nil
	})
}

func (r *reconcileOrder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

func (r *reconcileOrder) has(name string) bool {
	for _, n := range r.list() {
		if n == name {
			return true
		}
	}
	return false
}

// barBaz returns the Baz of a Bar, "" for nil.
func barBaz(t *testing.T, res *pbresource.Resource) string {
	if res == nil {
		return ""
	}
	bar := &pbfoov1.Bar{}
	require.NoError(t, res.Data.UnmarshalTo(bar))
	return bar.Baz
}

// cacheHas reports whether m's cache holds the resource id.
func cacheHas(t *testing.T, m *controller.Manager, id *pbresource.ID) bool {
	res, err := m.Cache().GetByID(id)
	require.NoError(t, err)
	return res != nil
}

// TestColdFollowerWatchesSingletonTypesOnceLeading: with warm standby off,
// a follower does not watch the type only its singleton controller needs
// (Bar), while it does watch the type of its each-server controller (Zip);
// it reports itself cold and the Bar type unprimed with the reason. Once it
// leads it watches Bar, primes and reconciles; after losing the lease it
// keeps the watch open and is a warm follower.
func TestColdFollowerWatchesSingletonTypesOnceLeading(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "before", "x", nil)
	client := newWatchCounter(svc.Client)
	m := newManager(t, client, controller.WithWarmStandby(false))
	bars, zips := &reconcileOrder{}, &reconcileOrder{}
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).WithReconciler(bars.reconciler()))
	m.MustRegister(controller.NewController("zip", foo.ZipType).
		WithPlacement(controller.PlacementEachServer).WithReconciler(zips.reconciler()))
	require.Equal(t, controller.FollowingCold, m.LeaderState(), "before Run")
	runManager(t, m)

	// The each-server controller runs: its type is watched and primed.
	writeZip(t, svc.Client, "z")
	require.Eventually(t, func() bool { return zips.has("z") }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, client.count()["foo.v1.Bar"], "a cold follower watches a singleton-only type")
	cachedBars, err := m.Cache().All(foo.BarV1Type)
	require.NoError(t, err)
	assert.Empty(t, cachedBars)
	assert.Equal(t, controller.FollowingCold, m.LeaderState())
	assert.Equal(t, "following (cold)", m.LeaderState().String())
	assert.False(t, m.Primed())
	err = m.CheckPrimed()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "types not primed: foo.v1.Bar")
	assert.Contains(t, err.Error(), "not watched until this Manager leads (warm standby off): foo.v1.Bar")
	assert.NotContains(t, err.Error(), "Zip")
	require.NoError(t, m.CheckWatchedPrimed(), "what a cold follower watches is primed")

	m.SetLeader(true)
	require.Eventually(t, func() bool { return bars.has("before") }, 5*time.Second, time.Millisecond)
	assert.Equal(t, controller.Leading, m.LeaderState())
	assert.True(t, m.Primed())
	require.NoError(t, m.CheckPrimed())

	// A follower that has led stays warm: the watch stays open.
	m.SetLeader(false)
	assert.Equal(t, controller.FollowingWarm, m.LeaderState())
	writeBar(t, svc.Client, "after", "x", nil)
	require.Eventually(t, func() bool { return cacheHas(t, m, barID("after")) }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, client.count()["foo.v1.Bar"], "the watch was not kept open")
	assert.False(t, bars.has("after"), "a follower reconciled")
}

// TestColdStandbyWithoutSingletonOnlyTypesIsWarm: with warm standby off
// but every type also needed by an each-server controller, nothing waits
// for the lease, so the follower is warm and primes at once.
func TestColdStandbyWithoutSingletonOnlyTypesIsWarm(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "a", "x", nil)
	m := newManager(t, svc.Client, controller.WithWarmStandby(false))
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).WithReconciler((&reconcileOrder{}).reconciler()))
	m.MustRegister(controller.NewController("bar-everywhere", foo.BarV1Type).
		WithPlacement(controller.PlacementEachServer).WithReconciler((&reconcileOrder{}).reconciler()))
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))
	assert.Equal(t, controller.FollowingWarm, m.LeaderState())
}

// TestWarmFollowerPrimesWithoutReconciling: a warm follower (the default)
// primes every type before it leads, runs neither reconciler nor mapper
// while it follows, and reconciles at once when it leads, without a
// second watch.
func TestWarmFollowerPrimesWithoutReconciling(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "before", "x", nil)
	client := newWatchCounter(svc.Client)
	m := newManager(t, client)
	bars, barrier := &reconcileOrder{}, &reconcileOrder{}
	mapped := &counter{}
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithWatch(foo.ZipType, func(_ context.Context, _ reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
			mapped.inc(res.Id.Name)
			return []reconcile.Request{{ID: barID("before")}}, nil
		}).
		WithReconciler(bars.reconciler()))
	// An each-server controller on Zip: once it has seen a Zip, the
	// Manager has dispatched that Zip's event.
	m.MustRegister(controller.NewController("zip", foo.ZipType).
		WithPlacement(controller.PlacementEachServer).WithReconciler(barrier.reconciler()))
	runManager(t, m)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx), "a warm follower primes without the lease")
	assert.Equal(t, controller.FollowingWarm, m.LeaderState())
	assert.Equal(t, "following (warm)", m.LeaderState().String())
	assert.True(t, cacheHas(t, m, barID("before")))
	writeZip(t, svc.Client, "z1")
	require.Eventually(t, func() bool { return barrier.has("z1") }, 5*time.Second, time.Millisecond)
	assert.Empty(t, bars.list(), "a follower reconciled")
	assert.Equal(t, 0, mapped.total(), "a follower ran a mapper")

	m.SetLeader(true)
	require.Eventually(t, func() bool { return bars.has("before") }, 5*time.Second, time.Millisecond)
	writeZip(t, svc.Client, "z2")
	require.Eventually(t, func() bool { return mapped.get("z2") == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 0, mapped.get("z1"), "a change seen while following went to the mapper")
	assert.Equal(t, 1, client.count()["foo.v1.Bar"])
	assert.Equal(t, 1, client.count()["foo.v1.Zip"])
	m.SetLeader(false)
}

// TestTakeOverQueuesRecentChangesFirst: a resource changed while the
// Manager followed is handed out before the bulk of the cache when it
// starts leading, though everything goes into the queue at once and one
// worker takes from it. A change found by the snapshot is not recent.
func TestTakeOverQueuesRecentChangesFirst(t *testing.T) {
	svc := startService(t)
	for _, n := range names(200, "bulk") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	m := newManager(t, svc.Client)
	bars := &reconcileOrder{}
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).WithConcurrency(1).WithReconciler(bars.reconciler()))
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))

	writeBar(t, svc.Client, "changed-1", "x", nil)
	writeBar(t, svc.Client, "changed-2", "x", nil)
	writeBar(t, svc.Client, "bulk-7", "changed", nil) // an update counts too
	require.Eventually(t, func() bool {
		res, err := m.Cache().GetByID(barID("bulk-7"))
		return err == nil && barBaz(t, res) == "changed" && cacheHas(t, m, barID("changed-2"))
	}, 5*time.Second, time.Millisecond)

	m.SetLeader(true)
	require.Eventually(t, func() bool { return len(bars.list()) >= 202 }, 10*time.Second, time.Millisecond)
	got := bars.list()
	assert.Equal(t, []string{"bulk-7", "changed-2", "changed-1"}, got[:3], "the recent changes, newest first, before the bulk")
	m.SetLeader(false)
}

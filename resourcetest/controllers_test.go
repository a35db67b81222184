package resourcetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/selector"
)

func TestRunControllers(t *testing.T) {
	svc := startService(t)
	client := resourcetest.NewClient(svc.Client)
	mgr := resourcetest.RunControllers(t, client, barController())

	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x", Qux: svc.Resource(foo.ZipType, "zip").ID()}).Write(t, client)
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, zipMissing("zip"))

	svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, client)
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, accepted("ZipFound"))

	// The Manager is the leader and its cache is primed and current.
	cached, err := mgr.Cache().GetByID(bar.Id)
	require.NoError(t, err)
	require.NotNil(t, cached)
}

func TestRunControllersStopsTheManagerAtTheEnd(t *testing.T) {
	svc := startService(t)
	started := make(chan context.Context, 1)
	t.Run("inner", func(t *testing.T) {
		ctrl := controller.NewController("stopper", foo.BarV1Type).
			WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })).
			WithInitializer(reconcile.InitializeFunc(func(ctx context.Context, _ reconcile.Runtime) error {
				started <- ctx
				return nil
			}))
		resourcetest.RunControllers(t, svc.Client, ctrl)
		select {
		case ctx := <-started:
			started <- ctx
		case <-time.After(5 * time.Second):
			t.Fatal("the controller did not start")
		}
	})
	ctx := <-started
	require.Error(t, ctx.Err(), "the controller was still running after its test ended")
}

func TestRunControllersRejectsMisconfiguredControllers(t *testing.T) {
	svc := startService(t)
	f := runFake(func(ft *fakeT) {
		resourcetest.RunControllers(ft, svc.Client, controller.NewController("no-reconciler", foo.BarV1Type))
	})
	requireFailed(t, f, true, "registering a controller", `"no-reconciler"`, "no reconciler")
}

func TestHarnessRejectsMisconfiguredControllers(t *testing.T) {
	svc := startService(t)
	f := runFake(func(ft *fakeT) {
		resourcetest.NewControllerHarness(ft, svc.Client, controller.NewController("no-reconciler", foo.BarV1Type))
	})
	requireFailed(t, f, true, `"no-reconciler"`, "no reconciler")
}

func TestHarnessMap(t *testing.T) {
	svc := startService(t)
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	zipID := svc.Resource(foo.ZipType, "zip").ID()
	a := h.Write(t, svc.Resource(foo.BarV1Type, "a").WithData(t, &pbfoov1.Bar{Baz: "a", Qux: zipID}))
	b := h.Write(t, svc.Resource(foo.BarV1Type, "b").WithData(t, &pbfoov1.Bar{Baz: "b", Qux: zipID}))
	h.Write(t, svc.Resource(foo.BarV1Type, "c").WithData(t, &pbfoov1.Bar{Baz: "c"}))

	// The watched type goes through the mapper (which uses the index).
	zip := svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "z"}).Build()
	reqs, err := h.Map(t, zip)
	require.NoError(t, err)
	var names []string
	for _, r := range reqs {
		names = append(names, r.ID.Name)
	}
	require.ElementsMatch(t, []string{a.Id.Name, b.Id.Name}, names)

	// The managed type maps to itself.
	reqs, err = h.Map(t, a)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.True(t, resource.EqualID(a.Id, reqs[0].ID))

	// A type the controller does not know is a mistake in the test.
	f := runFake(func(ft *fakeT) {
		h.Map(ft, svc.Resource(foo.QuxType, "q").Build())
	})
	requireFailed(t, f, true, `controller "bar-acceptor" neither manages nor watches foo.v1.Qux`)
}

func TestHarnessMapperErrorsAreReturned(t *testing.T) {
	svc := startService(t)
	boom := errors.New("boom")
	ctrl := controller.NewController("failing-mapper", foo.BarV1Type).
		WithWatch(foo.ZipType, func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
			return nil, boom
		}).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil }))
	h := resourcetest.NewControllerHarness(t, svc.Client, ctrl)
	_, err := h.Map(t, svc.Resource(foo.ZipType, "z").Build())
	require.ErrorIs(t, err, boom)
}

func TestHarnessReconcileSeesOnlyTheCache(t *testing.T) {
	svc := startService(t)
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	zipID := svc.Resource(foo.ZipType, "zip").ID()
	bar := h.Write(t, svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x", Qux: zipID}))

	// Written to the service behind the harness's back: the cache lags.
	svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
	require.NoError(t, h.Reconcile(t, bar.Id))
	h.Client.RequireStatusCondition(t, bar.Id, acceptedKey, zipMissing("zip"))

	// Sync catches up with the service.
	h.Sync(t)
	require.NoError(t, h.Reconcile(t, bar.Id))
	h.Client.RequireStatusCondition(t, bar.Id, acceptedKey, accepted("ZipFound"))

	// Sync also drops what the service no longer has, and Upsert puts
	// resources in the cache only.
	h.Client.MustDelete(t, zipID)
	h.Sync(t)
	require.Equal(t, 0, h.Cache.Len(foo.ZipType))
	h.Upsert(t, svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "z"}).Build())
	require.Equal(t, 1, h.Cache.Len(foo.ZipType))

	// Reconciling a resource that is not in the cache is the controller's
	// business; this one ignores it.
	require.NoError(t, h.Reconcile(t, svc.Resource(foo.BarV1Type, "gone").ID()))
}

func TestHarnessSyncReadsEveryTenancyAndVersion(t *testing.T) {
	svc := startService(t)
	// Like a Manager's cache, Sync holds Bars stored under any
	// GroupVersion. (barController's index decodes foo.v1.Bar data, so it
	// cannot index a foo.v2.Bar; a plain controller is used here.)
	ctrl := controller.NewController("plain", foo.BarV1Type).
		WithWatch(foo.ZipType, func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
			return nil, nil
		}).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil }))
	h := resourcetest.NewControllerHarness(t, svc.Client, ctrl)
	svc.Resource(foo.BarV1Type, "a").WithTenancy(&pbresource.Tenancy{Partition: "p1", Namespace: "n1"}).WithData(t, &pbfoov1.Bar{Baz: "a"}).Write(t, svc.Client)
	svc.Resource(foo.BarV1Type, "b").WithData(t, &pbfoov1.Bar{Baz: "b"}).Write(t, svc.Client)
	svc.Resource(foo.BarV2Type, "c").WithData(t, &pbfoov2.Bar{Baz: "c"}).Write(t, svc.Client)
	svc.Resource(foo.ZipType, "z").WithTenancy(&pbresource.Tenancy{Partition: "p2"}).WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
	h.Sync(t)
	require.Equal(t, 3, h.Cache.Len(foo.BarV1Type))
	require.Equal(t, 1, h.Cache.Len(foo.ZipType))
}

func TestHarnessInitializeAndRequeue(t *testing.T) {
	svc := startService(t)
	initialized := false
	ctrl := controller.NewController("requeuer", foo.BarV1Type).
		WithInitializer(reconcile.InitializeFunc(func(_ context.Context, rt reconcile.Runtime) error {
			require.NotNil(t, rt.Client)
			require.NotNil(t, rt.Cache)
			initialized = true
			return nil
		})).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error {
			return reconcile.RequeueAfter(time.Minute)
		}))
	h := resourcetest.NewControllerHarness(t, svc.Client, ctrl)
	require.NoError(t, h.Initialize(t))
	require.True(t, initialized)
	err := h.Reconcile(t, svc.Resource(foo.BarV1Type, "x").ID())
	var requeue reconcile.RequeueAfterError
	require.ErrorAs(t, err, &requeue)
	require.Equal(t, time.Minute, time.Duration(requeue))

	// Without an initializer there is nothing to run.
	require.NoError(t, resourcetest.NewControllerHarness(t, svc.Client, barController()).Initialize(t))
}

func TestNewCache(t *testing.T) {
	bar := resourcetest.Resource(foo.BarV1Type, "bar").
		WithTenancy(&pbresource.Tenancy{Partition: "default", Namespace: "default"}).
		WithData(t, &pbfoov1.Bar{Baz: "x", Qux: &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "zip"}}).
		Build()
	c := resourcetest.NewCache(t, barController(), bar)
	got, err := c.GetByID(bar.Id)
	require.NoError(t, err)
	require.NotNil(t, got)
	ids, err := c.ListIDs(foo.BarV1Type, "bars-by-zip", cache.Key(&pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "zip"}))
	require.NoError(t, err)
	require.Len(t, ids, 1, "the controller's index is in the cache")

	f := runFake(func(ft *fakeT) {
		resourcetest.NewCache(ft, barController(), resourcetest.Resource(foo.QuxType, "q").Build())
	})
	requireFailed(t, f, true, `adding foo.v1.Qux/./q to the cache of controller "bar-acceptor"`)
}

func TestBuiltinControllersReapOwnedResources(t *testing.T) {
	svc := startService(t, resourcetest.WithBuiltinControllers())
	require.NotNil(t, svc.Builtins)
	client := resourcetest.NewClient(svc.Client)
	zip := svc.Resource(foo.ZipType, "owner").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, client)
	bar := svc.Resource(foo.BarV1Type, "owned").WithData(t, &pbfoov1.Bar{Baz: "x"}).WithOwner(zip.Id).Write(t, client)

	client.MustDelete(t, zip.Id)
	client.WaitForDeletion(t, bar.Id)
}

func TestNoBuiltinControllersByDefault(t *testing.T) {
	require.Nil(t, startService(t).Builtins)
}

func TestRunControllersWithManagerOptions(t *testing.T) {
	svc := startService(t)
	client := resourcetest.NewClient(svc.Client)
	reg := prometheus.NewRegistry()
	resourcetest.RunControllersWith(t, client,
		resourcetest.Controllers(barController()),
		resourcetest.WithManagerOptions(controller.WithMetrics(reg)))

	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, accepted("NoZip"))

	// The option reached the Manager: its metrics are on our registry.
	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	require.Contains(t, names, "loom_controller_reconcile_total")
}

func TestRunControllersWithRejectedManagerOption(t *testing.T) {
	svc := startService(t)
	reg := prometheus.NewRegistry()
	// Registering the same metrics twice on one registry is an error.
	f := runFake(func(ft *fakeT) {
		resourcetest.RunControllersWith(ft, svc.Client,
			resourcetest.Controllers(barController()),
			resourcetest.WithManagerOptions(controller.WithMetrics(reg), controller.WithMetrics(reg)))
	})
	requireFailed(t, f, true, "creating the controller manager", "registering controller metrics")
}

// TestHarnessSelection checks that the harness's cache, like a Manager's,
// holds only what the controller's selector selects, on Sync and on Write.
func TestHarnessSelection(t *testing.T) {
	svc := startService(t)
	ctrl := controller.NewController("payments", foo.BarV1Type).
		WithSelector(foo.BarV1Type, selector.MustParse("team=payments")).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil }))
	h := resourcetest.NewControllerHarness(t, svc.Client, ctrl)
	bar := func(name, team string) *resourcetest.ResourceBuilder {
		return svc.Resource(foo.BarV1Type, name).WithData(t, &pbfoov1.Bar{Baz: name}).WithMeta("team", team)
	}
	bar("in", "payments").Write(t, svc.Client)
	bar("out", "search").Write(t, svc.Client)
	h.Sync(t)
	require.Equal(t, 1, h.Cache.Len(foo.BarV1Type))
	in, err := h.Cache.GetByID(svc.Resource(foo.BarV1Type, "in").ID())
	require.NoError(t, err)
	require.NotNil(t, in)

	h.Write(t, bar("in", "search"))
	h.Write(t, bar("new", "payments"))
	h.Write(t, bar("new-out", "search"))
	require.Equal(t, 1, h.Cache.Len(foo.BarV1Type))
	got, err := h.Cache.GetByID(svc.Resource(foo.BarV1Type, "new").ID())
	require.NoError(t, err)
	require.NotNil(t, got)
}

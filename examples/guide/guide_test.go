package guide

import (
	"context"
	"testing"
	"time"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestGuideControllers runs the guide's code end to end.
func TestGuideControllers(t *testing.T) {
	client := resourcetest.RunResourceService(t, RegisterTypes)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runControllers(ctx, client, prometheus.NewRegistry()) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	read := func(name string) (*pbresource.Resource, error) {
		rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: BarType, Name: name}})
		return rsp.GetResource(), err
	}
	// The initializer made the default Bar, and the reconciler accepted it.
	require.Eventually(t, func() bool {
		res, err := read("default")
		return err == nil && res.Status["guide.bar"].GetObservedGeneration() == res.Generation
	}, 5*time.Second, 2*time.Millisecond)

	data, err := anypb.New(&pbfoov1.Bar{Baz: "Mixed Case"})
	require.NoError(t, err)
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: BarType, Name: "mine"}, Data: data}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		res, err := read("mine")
		return err == nil && res.Status["guide.bar"].GetObservedGeneration() == res.Generation
	}, 5*time.Second, 2*time.Millisecond)
	res, _ := read("mine")
	bar := &pbfoov1.Bar{}
	require.NoError(t, res.Data.UnmarshalTo(bar))
	require.Equal(t, "mixed case", bar.Baz, "the Mutate hook lower-cased baz")

	_, err = client.Delete(ctx, &pbresource.DeleteRequest{Id: res.Id})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := read("mine")
		return status.Code(err) == codes.NotFound
	}, 5*time.Second, 2*time.Millisecond, "the finalizer was released and the Bar deleted")

	// The Validate hook names the field.
	empty, _ := anypb.New(&pbfoov1.Bar{})
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: BarType, Name: "empty"}, Data: empty}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, err.Error(), `"baz"`)
}

// TestReconcilerWritesStatusAtCurrentGeneration runs the guide's reconciler
// once on a new Bar: in that single pass it adds the finalizer and writes
// the status, and the status names the generation the finalizer write
// produced, the Bar's current one, not the one the reconciler read.
func TestReconcilerWritesStatusAtCurrentGeneration(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	bar := h.Write(t, svc.Resource(BarType, "fresh").WithData(t, &pbfoov1.Bar{Baz: "fresh"}))
	require.Empty(t, bar.Metadata["finalizers"])

	require.NoError(t, h.Reconcile(t, bar.Id))

	got := h.Client.RequireResourceExists(t, bar.Id)
	require.Equal(t, barFinalizer, got.Metadata["finalizers"], "the reconciler added its finalizer")
	st := got.Status["guide.bar"]
	require.NotNil(t, st, "the status was written in the same pass")
	require.NotEqual(t, bar.Generation, got.Generation, "adding the finalizer made a new generation")
	require.Equal(t, got.Generation, st.ObservedGeneration, "the status names the current generation")

	// The next pass, with the cache caught up, finds nothing to do.
	h.Sync(t)
	require.NoError(t, h.Reconcile(t, bar.Id))
	h.Client.RequireVersionUnchanged(t, bar.Id, got.Version)
}

// TestInitializerLeavesAnExistingBarAlone runs the initializer again (as a
// restart does) once the reconciler has added its finalizer to the default
// Bar: the Bar is not written again, so the finalizer stays.
func TestInitializerLeavesAnExistingBarAlone(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	require.NoError(t, h.Initialize(t))
	id := &pbresource.ID{Type: BarType, Name: "default"}
	created := h.Client.RequireResourceExists(t, id)
	h.Sync(t)
	require.NoError(t, h.Reconcile(t, created.Id))
	reconciled := h.Client.RequireResourceExists(t, id)
	require.Equal(t, barFinalizer, reconciled.Metadata["finalizers"])

	require.NoError(t, h.Initialize(t))
	again := h.Client.RequireVersionUnchanged(t, id, reconciled.Version)
	require.Equal(t, barFinalizer, again.Metadata["finalizers"])
}

// TestFilteredBarControllerSettles runs the guide's filtered controller: a
// new Bar still gets its finalizer and its status (the finalizer write is a
// new generation, which the own-status filter passes), and the status write
// that follows wakes nothing.
func TestFilteredBarControllerSettles(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	resourcetest.RunControllers(t, svc.Client, filteredBarController())
	bar := svc.Resource(BarType, "filtered").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, svc.Client)
	require.Eventually(t, func() bool {
		rsp, err := svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: bar.Id})
		return err == nil && rsp.Resource.Metadata["finalizers"] == barFinalizer &&
			rsp.Resource.Status["guide.bar"].GetObservedGeneration() == rsp.Resource.Generation
	}, 5*time.Second, 2*time.Millisecond)
}

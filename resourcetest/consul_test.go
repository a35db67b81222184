package resourcetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

// TestConsulLikeKeepsOneGroupVersion checks that the Consul-like service's
// List and WatchList keep only the requested GroupVersion.
func TestConsulLikeKeepsOneGroupVersion(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(0))
	svc.Resource(foo.BarV1Type, "one").WithData(t, &pbfoov1.Bar{Baz: "1"}).Write(t, svc.Client)
	svc.Resource(foo.BarV2Type, "two").WithData(t, &pbfoov2.Bar{Baz: "2"}).Write(t, svc.Client)
	all := &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}
	for typ, want := range map[*pbresource.Type]string{foo.BarV1Type: "one", foo.BarV2Type: "two"} {
		rsp, err := svc.Client.List(context.Background(), &pbresource.ListRequest{Type: typ, Tenancy: all})
		require.NoError(t, err)
		require.Len(t, rsp.Resources, 1)
		require.Equal(t, want, rsp.Resources[0].Id.Name)

		ctx, cancel := context.WithCancel(context.Background())
		stream, err := svc.Client.WatchList(ctx, &pbresource.WatchListRequest{Type: typ, Tenancy: all})
		require.NoError(t, err)
		var names []string
		for {
			ev, err := stream.Recv()
			require.NoError(t, err)
			if end := ev.GetEndOfSnapshot(); end != nil {
				require.Empty(t, end.Version, "Consul's EndOfSnapshot has no version")
				break
			}
			names = append(names, ev.GetUpsert().GetResource().GetId().GetName())
		}
		cancel()
		require.Equal(t, []string{want}, names)
	}
}

// TestConsulLikeKeepsMarkedResources checks that removing a marked
// resource's last finalizer leaves it in the Consul-like service, marked,
// until a further Delete, and that finalizer.EnsureFinalizerRemoved (which
// issues that Delete) deletes it there as on Loom.
func TestConsulLikeKeepsMarkedResources(t *testing.T) {
	ctx := context.Background()
	for _, consul := range []bool{false, true} {
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}
		if consul {
			opts = append(opts, resourcetest.ConsulLike(0))
		}
		svc := resourcetest.StartService(t, opts...)
		read := func(name string) (*pbresource.Resource, error) {
			rsp, err := svc.Client.Read(ctx, &pbresource.ReadRequest{Id: svc.Resource(foo.BarV1Type, name).ID()})
			return rsp.GetResource(), err
		}
		markedWithFinalizer := func(name string) *pbresource.Resource {
			svc.Resource(foo.BarV1Type, name).WithData(t, &pbfoov1.Bar{Baz: name}).WithMeta(resource.FinalizerKey, "f").Write(t, svc.Client)
			_, err := svc.Client.Delete(ctx, &pbresource.DeleteRequest{Id: svc.Resource(foo.BarV1Type, name).ID()})
			require.NoError(t, err)
			res, err := read(name)
			require.NoError(t, err)
			require.True(t, resource.IsMarkedForDeletion(res))
			require.Equal(t, []string{"f"}, resource.Finalizers(res), "the service's own finalizer shows")
			return res
		}

		// A plain write removing the last finalizer.
		res := markedWithFinalizer("plain")
		finalizer.RemoveFinalizer(res, "f")
		res.Status = nil
		_, err := svc.Client.Write(ctx, &pbresource.WriteRequest{Resource: res})
		require.NoError(t, err)
		got, err := read("plain")
		if !consul {
			require.Equal(t, codes.NotFound, status.Code(err), "Loom deletes it with its last finalizer")
		} else {
			require.NoError(t, err, "Consul keeps it")
			require.True(t, resource.IsMarkedForDeletion(got))
			require.Empty(t, resource.Finalizers(got))
			_, err = svc.Client.Delete(ctx, &pbresource.DeleteRequest{Id: got.Id})
			require.NoError(t, err)
			_, err = read("plain")
			require.Equal(t, codes.NotFound, status.Code(err), "a further Delete deletes it")
		}

		// The runtime's helper deletes it on both.
		res = markedWithFinalizer("helper")
		left, err := finalizer.EnsureFinalizerRemoved(ctx, reconcile.Runtime{Client: svc.Client}, res, "f")
		require.NoError(t, err)
		require.Nil(t, left)
		_, err = read("helper")
		require.Equal(t, codes.NotFound, status.Code(err))
	}
}

// TestHarnessSyncAgainstConsulLike checks that ControllerHarness.Sync loads
// what the service holds even when its snapshot is stale.
func TestHarnessSyncAgainstConsulLike(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(time.Hour))
	svc.Resource(foo.BarV1Type, "before").WithData(t, &pbfoov1.Bar{Baz: "b"}).Write(t, svc.Client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := svc.Client.WatchList(ctx, &pbresource.WatchListRequest{Type: foo.BarV1Type,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}})
	require.NoError(t, err)
	for {
		ev, err := other.Recv()
		require.NoError(t, err)
		if ev.GetEndOfSnapshot() != nil {
			break
		}
	}
	svc.Resource(foo.BarV1Type, "after").WithData(t, &pbfoov1.Bar{Baz: "a"}).Write(t, svc.Client)

	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	h.Sync(t)
	for _, name := range []string{"before", "after"} {
		res, err := h.Cache.GetByID(svc.Resource(foo.BarV1Type, name).ID())
		require.NoError(t, err)
		require.NotNil(t, res, "%s is missing from the synced cache", name)
	}
}

// TestConsulLikeSendsNoBatches checks that the Consul-like service, over
// gRPC, sends single events to a watch that asks for batches, as Consul
// does, while the plain service batches them.
func TestConsulLikeSendsNoBatches(t *testing.T) {
	for _, consul := range []bool{false, true} {
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes), resourcetest.OverGRPC()}
		if consul {
			opts = append(opts, resourcetest.ConsulLike(0))
		}
		svc := resourcetest.StartService(t, opts...)
		for i := range 1000 {
			svc.Resource(foo.BarV1Type, fmt.Sprint("bar-", i)).WithData(t, &pbfoov1.Bar{Baz: "b"}).Write(t, svc.Client)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := svc.Client.WatchList(ctx, &pbresource.WatchListRequest{Type: foo.BarV1Type,
			Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}, BatchEvents: true})
		require.NoError(t, err)
		events, batches := 0, 0
		for events < 1001 {
			ev, err := stream.Recv()
			require.NoError(t, err)
			if b := ev.GetBatch(); b != nil {
				batches++
				events += len(b.Events)
			} else {
				events++
			}
		}
		cancel()
		if consul {
			require.Zero(t, batches, "the Consul-like service sent a batch")
		} else {
			require.Positive(t, batches, "the service sent no batch")
		}
	}
}

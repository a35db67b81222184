package etcd

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// TestFenceNamesOnlyLeaderKeys checks that a fence cannot be used to learn
// whether an etcd key exists, or its create revision: the backend accepts
// only its own leader keys as fences and refuses any other before asking
// etcd, and the ResourceService answers InvalidArgument alike whether the
// key exists, with that revision or not. A fence on a leader key still
// works.
func TestFenceNamesOnlyLeaderKeys(t *testing.T) {
	be := newTestBackend(t)
	ctx := testContext(t)
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	client := server.NewInProcessClient(server.New(server.Config{Backend: be, Registry: reg}))

	data, err := anypb.New(&pbfoov1.Bar{Baz: "x"})
	require.NoError(t, err)
	bar := func(name string) *pbresource.Resource {
		return &pbresource.Resource{Id: &pbresource.ID{Type: foo.BarV1Type,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}, Data: data}
	}
	stored, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar("probe")})
	require.NoError(t, err)
	// An etcd key that exists, with its create revision: another
	// application's, and the key of a resource.
	other := newPrefix() + "/other-app/secret"
	put, err := testClient.Put(ctx, other, "v")
	require.NoError(t, err)
	resKey := be.keys.resource(stored.Resource.Id)
	got, err := testClient.Get(ctx, resKey)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)

	probes := []storage.Fence{
		{Key: other, Revision: put.Header.Revision},     // exists with that revision
		{Key: other, Revision: put.Header.Revision + 1}, // exists, not with that revision
		{Key: other + "-missing", Revision: 1},          // does not exist
		{Key: resKey, Revision: got.Kvs[0].CreateRevision},
		{Key: be.ElectionKey(), Revision: 1},            // the election key itself
		{Key: be.ElectionKey() + "/xyz", Revision: 1},   // not a lease id
		{Key: be.ElectionKey() + "/1/2", Revision: 1},   // deeper
		{Key: be.ElectionKey() + "x/694d", Revision: 1}, // a sibling election
		{Key: "/elsewhere" + be.ElectionKey() + "/694d", Revision: 1},
	}
	var first string
	for _, f := range probes {
		_, err := be.WriteCAS(storage.WithFence(ctx, f), bar("direct"))
		require.ErrorIs(t, err, storage.ErrInvalidFence, "backend, fence %v", f)
		require.ErrorIs(t, be.DeleteCAS(storage.WithFence(ctx, f), stored.Resource.Id, ""), storage.ErrInvalidFence, "backend delete, fence %v", f)

		fctx := metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, resource.FormatFence(f.Key, f.Revision))
		_, err = client.Write(fctx, &pbresource.WriteRequest{Resource: bar("probe")})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "fence %v: %v", f, err)
		// Beside the key it names, the answer is the same whatever the
		// key.
		msg := strings.Replace(status.Convert(err).Message(), resource.Quote(f.Key), "KEY", 1)
		if first == "" {
			first = msg
		}
		require.Equal(t, first, msg)
	}
	after, err := client.Read(ctx, &pbresource.ReadRequest{Id: stored.Resource.Id})
	require.NoError(t, err)
	require.Equal(t, stored.Resource.Version, after.Resource.Version, "nothing was written")

	// A leader key of the backend's election: the fence is asked about.
	leader := be.ElectionKey() + "/694d9a1b2c3d4e5f"
	_, err = be.WriteCAS(storage.WithFence(ctx, storage.Fence{Key: leader, Revision: 1}), bar("direct"))
	require.ErrorIs(t, err, storage.ErrFenced)
}

package finalizer_test

import (
	"context"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestInMemoryHelpers(t *testing.T) {
	res := &pbresource.Resource{}
	assert.False(t, finalizer.HasFinalizers(res))
	finalizer.AddFinalizer(res, "a")
	finalizer.AddFinalizer(res, "b")
	finalizer.AddFinalizer(res, "a")
	assert.Equal(t, []string{"a", "b"}, finalizer.GetFinalizers(res))
	assert.True(t, finalizer.HasFinalizer(res, "b"))
	finalizer.RemoveFinalizer(res, "a")
	assert.Equal(t, "b", res.Metadata["finalizers"])
	finalizer.RemoveFinalizer(res, "b")
	assert.False(t, finalizer.HasFinalizers(res))
	_, present := res.Metadata["finalizers"]
	assert.False(t, present, "the key goes with the last finalizer")
	assert.False(t, finalizer.IsMarkedForDeletion(res))
}

func TestEnsureFlow(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	rt := runtime.Runtime{Client: client}
	ctx := context.Background()
	data, err := anypb.New(&pbfoov1.Bar{Baz: "x"})
	require.NoError(t, err)
	id := &pbresource.ID{Type: foo.BarV1Type, Name: "bar"}
	written, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
	require.NoError(t, err)
	res := written.Resource

	require.NoError(t, finalizer.EnsureHasFinalizer(ctx, rt, res, "test/cleanup"))
	assert.False(t, finalizer.HasFinalizer(res, "test/cleanup"), "the argument is not changed")
	got, err := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	require.NoError(t, err)
	assert.True(t, finalizer.HasFinalizer(got.Resource, "test/cleanup"))
	// Ensuring again with the fresh copy writes nothing.
	require.NoError(t, finalizer.EnsureHasFinalizer(ctx, rt, got.Resource, "test/cleanup"))
	again, _ := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	assert.Equal(t, got.Resource.Version, again.Resource.Version)

	// A stale copy is refused rather than undoing newer writes.
	err = finalizer.EnsureHasFinalizer(ctx, rt, res, "other")
	assert.Equal(t, codes.Aborted, status.Code(err))

	_, err = client.Delete(ctx, &pbresource.DeleteRequest{Id: res.Id})
	require.NoError(t, err)
	marked, err := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	require.NoError(t, err)
	require.True(t, finalizer.IsMarkedForDeletion(marked.Resource))

	require.NoError(t, finalizer.EnsureFinalizerRemoved(ctx, rt, marked.Resource, "test/cleanup"))
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	assert.Equal(t, codes.NotFound, status.Code(err), "removing the last finalizer deletes the resource")
}

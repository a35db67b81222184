package finalizer_test

import (
	"context"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
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
	rt := reconcile.Runtime{Client: client}
	ctx := context.Background()
	data, err := anypb.New(&pbfoov1.Bar{Baz: "x"})
	require.NoError(t, err)
	id := &pbresource.ID{Type: foo.BarV1Type, Name: "bar"}
	written, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
	require.NoError(t, err)
	res := written.Resource

	updated, err := finalizer.EnsureHasFinalizer(ctx, rt, res, "test/cleanup")
	require.NoError(t, err)
	assert.False(t, finalizer.HasFinalizer(res, "test/cleanup"), "the argument is not changed")
	got, err := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	require.NoError(t, err)
	assert.True(t, finalizer.HasFinalizer(got.Resource, "test/cleanup"))
	assert.True(t, proto.Equal(got.Resource, updated), "the result is the resource as stored: %v", updated)
	assert.NotEqual(t, res.Generation, updated.Generation)
	// Ensuring again with the fresh copy writes nothing and returns it.
	same, err := finalizer.EnsureHasFinalizer(ctx, rt, updated, "test/cleanup")
	require.NoError(t, err)
	assert.Same(t, updated, same)
	again, _ := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	assert.Equal(t, got.Resource.Version, again.Resource.Version)

	// A stale copy is refused rather than undoing newer writes.
	_, err = finalizer.EnsureHasFinalizer(ctx, rt, res, "other")
	assert.Equal(t, codes.Aborted, status.Code(err))

	// With two finalizers, removing one leaves the marked resource, and the
	// result is its new version.
	updated, err = finalizer.EnsureHasFinalizer(ctx, rt, updated, "test/other")
	require.NoError(t, err)
	_, err = client.Delete(ctx, &pbresource.DeleteRequest{Id: res.Id})
	require.NoError(t, err)
	marked, err := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	require.NoError(t, err)
	require.True(t, finalizer.IsMarkedForDeletion(marked.Resource))
	left, err := finalizer.EnsureFinalizerRemoved(ctx, rt, marked.Resource, "test/other")
	require.NoError(t, err)
	require.NotNil(t, left)
	assert.Equal(t, []string{"test/cleanup"}, finalizer.GetFinalizers(left))
	stillMarked, err := client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	require.NoError(t, err)
	assert.True(t, proto.Equal(stillMarked.Resource, left), "the result is the resource as stored: %v", left)

	gone, err := finalizer.EnsureFinalizerRemoved(ctx, rt, left, "test/cleanup")
	require.NoError(t, err)
	assert.Nil(t, gone)
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: res.Id})
	assert.Equal(t, codes.NotFound, status.Code(err), "removing the last finalizer deletes the resource")
}

// consulLike answers as Consul's service does where it differs from Loom's:
// a Write that removes the last finalizer of a marked resource stores it
// (still marked), and only a further Delete removes it. It records the
// Deletes it gets.
type consulLike struct {
	pbresource.ResourceServiceClient
	stored    *pbresource.Resource
	deletes   []*pbresource.DeleteRequest
	deleteErr error
}

func (c *consulLike) Write(_ context.Context, in *pbresource.WriteRequest, _ ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	if in.Resource.Version != c.stored.Version {
		return nil, status.Error(codes.Aborted, "version mismatch")
	}
	next := proto.Clone(in.Resource).(*pbresource.Resource)
	next.Version = c.stored.Version + "1"
	c.stored = next
	return &pbresource.WriteResponse{Resource: proto.Clone(next).(*pbresource.Resource)}, nil
}

func (c *consulLike) Delete(_ context.Context, in *pbresource.DeleteRequest, _ ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	c.deletes = append(c.deletes, proto.Clone(in).(*pbresource.DeleteRequest))
	if c.deleteErr != nil {
		return nil, c.deleteErr
	}
	if c.stored != nil && in.Id.Uid == c.stored.Id.Uid {
		c.stored = nil
	}
	return &pbresource.DeleteResponse{}, nil
}

func (c *consulLike) Read(_ context.Context, in *pbresource.ReadRequest, _ ...grpc.CallOption) (*pbresource.ReadResponse, error) {
	if c.stored == nil {
		return nil, status.Error(codes.NotFound, "not found")
	}
	return &pbresource.ReadResponse{Resource: proto.Clone(c.stored).(*pbresource.Resource)}, nil
}

func markedBar(uid string, finalizers string) *pbresource.Resource {
	meta := map[string]string{"deletionTimestamp": "2024-01-01T00:00:00Z"}
	if finalizers != "" {
		meta["finalizers"] = finalizers
	}
	return &pbresource.Resource{
		Id:       &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: "bar", Uid: uid},
		Version:  "7",
		Metadata: meta,
	}
}

// TestEnsureFinalizerRemovedDeletesOnConsul checks that removing the last
// finalizer of a marked resource completes the deletion on a service that
// keeps the resource marked (as Consul's does): the helper deletes it, at
// its Uid and without a version.
func TestEnsureFinalizerRemovedDeletesOnConsul(t *testing.T) {
	ctx := context.Background()
	res := markedBar("uid1", "a b")
	svc := &consulLike{stored: proto.Clone(res).(*pbresource.Resource)}
	rt := reconcile.Runtime{Client: svc}

	left, err := finalizer.EnsureFinalizerRemoved(ctx, rt, res, "a")
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, finalizer.GetFinalizers(left))
	assert.Empty(t, svc.deletes, "another finalizer remains: nothing to delete yet")

	gone, err := finalizer.EnsureFinalizerRemoved(ctx, rt, left, "b")
	require.NoError(t, err)
	assert.Nil(t, gone)
	require.Len(t, svc.deletes, 1)
	assert.Equal(t, "uid1", svc.deletes[0].Id.Uid, "the Delete is aimed at this resource's Uid")
	assert.Empty(t, svc.deletes[0].Version)
	assert.Nil(t, svc.stored, "the resource is deleted")
}

// TestEnsureFinalizerRemovedRetriesTheDelete checks that a marked resource
// left without finalizers (a Delete that failed after the Write) is deleted
// when the helper runs again, though there is no finalizer to remove.
func TestEnsureFinalizerRemovedRetriesTheDelete(t *testing.T) {
	ctx := context.Background()
	res := markedBar("uid1", "")
	svc := &consulLike{stored: proto.Clone(res).(*pbresource.Resource), deleteErr: status.Error(codes.Unavailable, "try later")}
	rt := reconcile.Runtime{Client: svc}

	_, err := finalizer.EnsureFinalizerRemoved(ctx, rt, res, "a")
	assert.Equal(t, codes.Unavailable, status.Code(err), "a failed Delete is returned, to be retried")

	svc.deleteErr = nil
	gone, err := finalizer.EnsureFinalizerRemoved(ctx, rt, res, "a")
	require.NoError(t, err)
	assert.Nil(t, gone)
	assert.Nil(t, svc.stored)

	// A FailedPrecondition for another reason than a newer resource (e.g.
	// a fenced write) is an error.
	svc.stored = proto.Clone(res).(*pbresource.Resource)
	svc.deleteErr = status.Error(codes.FailedPrecondition, "write fenced")
	_, err = finalizer.EnsureFinalizerRemoved(ctx, rt, res, "a")
	assert.Equal(t, codes.FailedPrecondition, status.Code(err))
}

// TestEnsureFinalizerRemovedSparesANewerResource runs on Loom: a stale,
// marked copy without finalizers names a resource that was deleted and
// created again under the same name. The Delete, aimed at the old Uid, is
// refused by the service; the helper counts the old resource as gone and
// the new one is untouched.
func TestEnsureFinalizerRemovedSparesANewerResource(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	rt := reconcile.Runtime{Client: client}
	ctx := context.Background()
	data, err := anypb.New(&pbfoov1.Bar{Baz: "x"})
	require.NoError(t, err)
	written, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: &pbresource.ID{Type: foo.BarV1Type, Name: "bar"}, Data: data,
	}})
	require.NoError(t, err)

	stale := markedBar(resource.NewULID(), "")
	gone, err := finalizer.EnsureFinalizerRemoved(ctx, rt, stale, "test/cleanup")
	require.NoError(t, err)
	assert.Nil(t, gone)
	got, err := client.Read(ctx, &pbresource.ReadRequest{Id: written.Resource.Id})
	require.NoError(t, err, "the newer Bar is still there")
	assert.Equal(t, written.Resource.Version, got.Resource.Version)
}

package upsert_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/upsert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

func barID(name string) *pbresource.ID {
	return &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

// setBaz is a mutate function that owns the Bar's data.
func setBaz(baz string) upsert.MutateFunc {
	return func(res *pbresource.Resource) error {
		data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
		res.Data = data
		return err
	}
}

func baz(t *testing.T, res *pbresource.Resource) string {
	t.Helper()
	var bar pbfoov1.Bar
	require.NoError(t, res.Data.UnmarshalTo(&bar))
	return bar.Baz
}

func read(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	rsp, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
	require.NoError(t, err)
	return rsp.Resource
}

func TestCreateThenUpdateThenUnchanged(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	ctx := context.Background()

	created, result, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("one"))
	require.NoError(t, err)
	assert.Equal(t, upsert.Created, result)
	assert.Equal(t, "one", baz(t, created))
	assert.NotEmpty(t, created.Id.Uid)

	updated, result, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("two"))
	require.NoError(t, err)
	assert.Equal(t, upsert.Updated, result)
	assert.Equal(t, "two", baz(t, updated))
	assert.Equal(t, created.Id.Uid, updated.Id.Uid)
	assert.NotEqual(t, created.Version, updated.Version)

	// The mutate function changes nothing: no write.
	same, result, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("two"))
	require.NoError(t, err)
	assert.Equal(t, upsert.Unchanged, result)
	assert.Equal(t, updated.Version, same.Version)
	assert.Equal(t, updated.Version, read(t, client, barID("b")).Version)

	// The copy differs, but the type's Mutate hook lowercases Baz, so the
	// service finds the write a no-op and keeps the version.
	same, result, err = upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("TWO"))
	require.NoError(t, err)
	assert.Equal(t, upsert.Unchanged, result)
	assert.Equal(t, updated.Version, same.Version)
	assert.Equal(t, "two", baz(t, same))
}

// What the caller does not own survives the update: finalizers and other
// metadata, and statuses.
func TestKeepsFinalizersMetadataAndStatus(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	stored := svc.Resource(foo.BarV1Type, "b").
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		WithMeta(resource.FinalizerKey, "guide.bar/cleanup").
		WithMeta("team", "blue").
		WithStatus("guide.bar", &pbresource.Status{Conditions: []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}}}).
		Write(t, svc.Client)

	got, result, err := upsert.CreateOrUpdate(context.Background(), svc.Client, barID("b"), setBaz("two"))
	require.NoError(t, err)
	assert.Equal(t, upsert.Updated, result)
	for _, res := range []*pbresource.Resource{got, read(t, svc.Client, barID("b"))} {
		assert.Equal(t, "two", baz(t, res))
		assert.True(t, finalizer.HasFinalizer(res, "guide.bar/cleanup"))
		assert.Equal(t, "blue", res.Metadata["team"])
		assert.True(t, resource.EqualStatus(stored.Status["guide.bar"], res.Status["guide.bar"]), "status kept")
	}
}

// A concurrent write between the read and the write makes the CAS write
// fail; the next round starts from the fresh copy and keeps both changes.
func TestConflictIsRetriedFromFreshCopy(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		testConflictIsRetriedFromFreshCopy(t, resourcetest.RunResourceService(t, foo.RegisterTypes))
	})
	t.Run("grpc", func(t *testing.T) {
		testConflictIsRetriedFromFreshCopy(t, resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.OverGRPC()).Client)
	})
}

func testConflictIsRetriedFromFreshCopy(t *testing.T, client pbresource.ResourceServiceClient) {
	ctx := context.Background()
	_, _, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("one"))
	require.NoError(t, err)

	calls := 0
	got, result, err := upsert.CreateOrUpdate(ctx, client, barID("b"), func(res *pbresource.Resource) error {
		calls++
		if calls == 1 {
			// Another writer adds a finalizer after our read.
			other := resource.Clone(res)
			finalizer.AddFinalizer(other, "other/finalizer")
			_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: other})
			require.NoError(t, err)
		}
		return setBaz("two")(res)
	})
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
	assert.Equal(t, upsert.Updated, result)
	assert.Equal(t, "two", baz(t, got))
	assert.True(t, finalizer.HasFinalizer(got, "other/finalizer"), "the concurrent writer's finalizer is kept")
}

// A conflict on every round ends with Aborted after the allowed rounds.
func TestConflictsGiveUpAfterAttempts(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	ctx := context.Background()
	_, _, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("one"))
	require.NoError(t, err)

	calls := 0
	_, _, err = upsert.CreateOrUpdate(ctx, client, barID("b"), func(res *pbresource.Resource) error {
		calls++
		other := resource.Clone(res)
		finalizer.AddFinalizer(other, "other-"+string(rune('a'+calls)))
		_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: other})
		require.NoError(t, err)
		return setBaz("two")(res)
	}, upsert.WithAttempts(3))
	assert.Equal(t, codes.Aborted, status.Code(err), "%v", err)
	assert.Equal(t, 3, calls)
}

// An error from the mutate function is returned as it is, without a write.
func TestMutateErrorStops(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	boom := errors.New("boom")
	_, _, err := upsert.CreateOrUpdate(context.Background(), client, barID("b"), func(*pbresource.Resource) error { return boom })
	assert.ErrorIs(t, err, boom)
	_, err = client.Read(context.Background(), &pbresource.ReadRequest{Id: barID("b")})
	assert.Equal(t, codes.NotFound, status.Code(err))
}

// The mutate function may not rename the resource.
func TestMutateMayNotChangeID(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	_, _, err := upsert.CreateOrUpdate(context.Background(), client, barID("b"), func(res *pbresource.Resource) error {
		res.Id.Name = "other"
		return setBaz("one")(res)
	})
	assert.ErrorContains(t, err, "changed the resource's ID")
}

// A resource deleted between the read and the write is created again from
// a fresh round.
func TestDeletedMeanwhileIsCreated(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	ctx := context.Background()
	first, _, err := upsert.CreateOrUpdate(ctx, client, barID("b"), setBaz("one"))
	require.NoError(t, err)

	calls := 0
	got, result, err := upsert.CreateOrUpdate(ctx, client, barID("b"), func(res *pbresource.Resource) error {
		calls++
		if calls == 1 {
			_, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: res.Id})
			require.NoError(t, err)
		}
		return setBaz("two")(res)
	})
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
	assert.Equal(t, upsert.Created, result)
	assert.NotEqual(t, first.Id.Uid, got.Id.Uid)
	assert.Equal(t, "two", baz(t, got))
}

package dependency_test

import (
	"context"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
)

var tenancy = &pbresource.Tenancy{Partition: "default", Namespace: "default"}

func bar(t *testing.T, name string, qux *pbresource.ID, owner *pbresource.ID) *pbresource.Resource {
	data, err := anypb.New(&pbfoov1.Bar{Baz: name, Qux: qux})
	require.NoError(t, err)
	return &pbresource.Resource{
		Id:    &pbresource.ID{Type: foo.BarV1Type, Tenancy: tenancy, Name: name, Uid: resource.NewULID()},
		Owner: owner,
		Data:  data,
	}
}

func names(reqs []reconcile.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.ID.Name
	}
	return out
}

func TestOwnerMappers(t *testing.T) {
	ctx := context.Background()
	zip := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "z", Uid: "u"}
	owned := bar(t, "b", nil, zip)

	// The owner by name, without the Uid of the lifetime that owns the
	// Bar: whatever Zip now has the name is reconciled.
	byName := resource.CloneID(zip)
	byName.Uid = ""
	reqs, err := dependency.MapOwner(ctx, reconcile.Runtime{}, owned)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	assert.True(t, resource.EqualID(byName, reqs[0].ID), "got %s", resource.IDString(reqs[0].ID))
	assert.Equal(t, "u", owned.Owner.Uid, "the resource is not changed")

	reqs, _ = dependency.MapOwner(ctx, reconcile.Runtime{}, bar(t, "lonely", nil, nil))
	assert.Empty(t, reqs)

	reqs, _ = dependency.MapOwnerFiltered(foo.ZipType)(ctx, reconcile.Runtime{}, owned)
	require.Len(t, reqs, 1)
	assert.True(t, resource.EqualID(byName, reqs[0].ID), "got %s", resource.IDString(reqs[0].ID))
	otherVersion := &pbresource.Type{Group: foo.ZipType.Group, GroupVersion: "v9", Kind: foo.ZipType.Kind}
	reqs, _ = dependency.MapOwnerFiltered(otherVersion)(ctx, reconcile.Runtime{}, owned)
	assert.Len(t, reqs, 1, "any GroupVersion of the type")
	reqs, _ = dependency.MapOwnerFiltered(foo.QuxType)(ctx, reconcile.Runtime{}, owned)
	assert.Empty(t, reqs)

	// One allocation per mapped change: the request and its ID together.
	mapper := dependency.MapOwnerFiltered(foo.ZipType)
	allocs := testing.AllocsPerRun(100, func() { _, _ = mapper(ctx, reconcile.Runtime{}, owned) })
	assert.Equal(t, 1.0, allocs)

	reqs, _ = dependency.ReplaceType(foo.BarV2Type)(ctx, reconcile.Runtime{}, owned)
	require.Len(t, reqs, 1)
	assert.Equal(t, "b", reqs[0].ID.Name)
	assert.True(t, resource.EqualType(foo.BarV2Type, reqs[0].ID.Type))
	assert.Empty(t, reqs[0].ID.Uid)

	multi := dependency.MultiMapper(dependency.MapOwner, dependency.ReplaceType(foo.BarV2Type))
	reqs, _ = multi(ctx, reconcile.Runtime{}, owned)
	assert.Len(t, reqs, 2)
}

func TestMapByIndex(t *testing.T) {
	c := cache.New()
	byQux := dependency.ReferenceIndex("qux", func(b *pbfoov1.Bar) resource.ReferenceOrID { return b.Qux })
	require.NoError(t, c.AddType(foo.BarV1Type, byQux))
	zipA := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "a"}
	zipB := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "b"}
	for _, r := range []*pbresource.Resource{bar(t, "one", zipA, nil), bar(t, "two", zipA, nil), bar(t, "three", zipB, nil), bar(t, "none", nil, nil)} {
		_, err := c.Upsert(r)
		require.NoError(t, err)
	}
	rt := reconcile.Runtime{Cache: c}
	zipRes := &pbresource.Resource{Id: resource.CloneID(zipA)}
	zipRes.Id.Uid = "whatever" // Uids do not matter to the key

	reqs, err := dependency.MapByIndex(foo.BarV1Type, "qux")(context.Background(), rt, zipRes)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"one", "two"}, names(reqs))

	_, err = dependency.MapByIndex(foo.BarV1Type, "missing")(context.Background(), rt, zipRes)
	assert.ErrorContains(t, err, `no index "missing"`)
}

func TestMapOwned(t *testing.T) {
	c := cache.New()
	require.NoError(t, c.AddType(foo.BarV1Type))
	owner := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "o", Uid: "u1"}
	_, _ = c.Upsert(bar(t, "child", nil, owner))
	_, _ = c.Upsert(bar(t, "orphan", nil, nil))
	// A Bar owned by an earlier Zip of the same name, not yet reaped.
	earlier := resource.CloneID(owner)
	earlier.Uid = "u0"
	_, _ = c.Upsert(bar(t, "earlier-child", nil, earlier))
	reqs, err := dependency.MapOwned(foo.BarV1Type)(context.Background(), reconcile.Runtime{Cache: c}, &pbresource.Resource{Id: owner})
	require.NoError(t, err)
	assert.Equal(t, []string{"child"}, names(reqs))
}

func TestMapDecoded(t *testing.T) {
	zip := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "z"}
	mapper := dependency.MapDecoded(func(_ context.Context, _ reconcile.Runtime, res *resource.Decoded[*pbfoov1.Bar]) ([]reconcile.Request, error) {
		if res.Data.Qux == nil {
			return nil, nil
		}
		return []reconcile.Request{{ID: &pbresource.ID{Type: foo.ZipType, Tenancy: res.Data.Qux.Tenancy, Name: res.Data.Qux.Name}}}, nil
	})
	reqs, err := mapper(context.Background(), reconcile.Runtime{}, bar(t, "b", zip, nil))
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	assert.Equal(t, "z", reqs[0].ID.Name)

	// Data of another message maps to nothing, without an error.
	other := bar(t, "other", nil, nil)
	other.Data, err = anypb.New(&pbfoov1.Zip{Zap: "not a bar"})
	require.NoError(t, err)
	reqs, err = mapper(context.Background(), reconcile.Runtime{}, other)
	require.NoError(t, err)
	assert.Empty(t, reqs)
}

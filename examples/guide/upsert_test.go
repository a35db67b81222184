package guide

import (
	"context"
	"testing"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/upsert"
	"github.com/stretchr/testify/require"
)

// TestSetBazKeepsTheFinalizer changes a Bar the reconciler has added its
// finalizer to: the read-modify-write keeps the finalizer, where a blanket
// Write of the Bar would drop it.
func TestSetBazKeepsTheFinalizer(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())
	ctx := context.Background()
	result, err := setBaz(ctx, svc.Client, "b", "one")
	require.NoError(t, err)
	require.Equal(t, upsert.Created, result)
	id := &pbresource.ID{Type: BarType, Name: "b"}
	h.Sync(t)
	require.NoError(t, h.Reconcile(t, h.Client.RequireResourceExists(t, id).Id))
	require.Equal(t, barFinalizer, h.Client.RequireResourceExists(t, id).Metadata["finalizers"])

	result, err = setBaz(ctx, svc.Client, "b", "two")
	require.NoError(t, err)
	require.Equal(t, upsert.Updated, result)
	res := h.Client.RequireResourceExists(t, id)
	require.Equal(t, barFinalizer, res.Metadata["finalizers"])
	var bar pbfoov1.Bar
	require.NoError(t, res.Data.UnmarshalTo(&bar))
	require.Equal(t, "two", bar.Baz)

	result, err = setBaz(ctx, svc.Client, "b", "two")
	require.NoError(t, err)
	require.Equal(t, upsert.Unchanged, result)
}

package guide

import (
	"context"
	"testing"

	"github.com/loomrt/loom/condition"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/require"
)

// TestSetReadyKeepsOtherConditions writes Ready on a Bar whose status has
// Accepted from the guide's reconciler: Accepted stays, Ready is added,
// and the status names the Bar's current generation.
func TestSetReadyKeepsOtherConditions(t *testing.T) {
	client := resourcetest.RunResourceService(t, RegisterTypes)
	ctx := context.Background()
	bar := resourcetest.Resource(BarType, "b").
		WithData(t, &pbfoov1.Bar{Baz: "x"}).
		WithStatus("guide.bar", &pbresource.Status{Conditions: []*pbresource.Condition{condition.True("Accepted", "Ok", "fine")}}).
		Write(t, client)
	rt := reconcile.Runtime{Client: client}
	require.NoError(t, setReady(ctx, rt, bar, false, "waiting"))

	read := resourcetest.NewClient(client).RequireResourceExists(t, bar.Id)
	st := read.Status["guide.bar"]
	require.True(t, condition.IsTrue(st, "Accepted"))
	require.True(t, condition.IsFalse(st, "Ready"))
	require.Equal(t, read.Generation, st.ObservedGeneration)
	require.True(t, condition.IsTrue(bar.Status["guide.bar"], "Accepted") && condition.Find(bar.Status["guide.bar"], "Ready") == nil,
		"the caller's resource is left alone")

	m, err := newSlogManager(client)
	require.NoError(t, err)
	require.NotNil(t, m)
}

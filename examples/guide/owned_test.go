package guide

import (
	"testing"
	"time"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server/reaper/reapertest"
	"github.com/stretchr/testify/require"
)

// TestZipGetsItsOwnBarWhenCreatedAgain runs the guide's Zip and Bar
// controllers, without the reaper at first: a Zip deleted and created
// again gets a Bar of its own (the old one, which the Bar controller's
// finalizer holds for a while, is replaced), and the reaper, let go once
// that is done, leaves it alone.
func TestZipGetsItsOwnBarWhenCreatedAgain(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	client := resourcetest.NewClient(svc.Client).WithTimeout(20 * time.Second)
	resourcetest.RunControllers(t, client, barController(), zipController())
	barID := svc.Resource(BarType, "z").ID()

	first := svc.Resource(ZipType, "z").WithData(t, &pbfoov1.Zip{Zap: "first"}).Write(t, client)
	oldBar := requireOwnBar(t, client, first, "zip first")
	client.WaitForResourceState(t, barID, func(t resourcetest.T, bar *pbresource.Resource) {
		require.True(t, finalizer.HasFinalizer(bar, barFinalizer), "the Bar controller has not added its finalizer yet")
	})

	client.MustDelete(t, first.Id)
	client.WaitForDeletion(t, first.Id)
	again := svc.Resource(ZipType, "z").WithData(t, &pbfoov1.Zip{Zap: "second"}).Write(t, client)
	bar := requireOwnBar(t, client, again, "zip second")
	require.NotEqual(t, oldBar.Id.Uid, bar.Id.Uid)

	reapertest.RunReaper(t, client)
	client.WaitForList(t, resource.TypeV1Tombstone, func(t resourcetest.T, tombs []*pbresource.Resource) {
		require.Empty(t, tombs)
	})
	require.Equal(t, bar.Id.Uid, requireOwnBar(t, client, again, "zip second").Id.Uid, "the reaper spared the new Bar")
}

// requireOwnBar waits until zip's status says its Bar is ready, and the
// Bar is owned by that Zip (its lifetime) and holds baz.
func requireOwnBar(t *testing.T, client *resourcetest.Client, zip *pbresource.Resource, baz string) *pbresource.Resource {
	t.Helper()
	client.WaitForStatusCondition(t, zip.Id, "guide.zip", &pbresource.Condition{
		Type: "BarReady", State: pbresource.Condition_STATE_TRUE, Reason: "Ok", Message: "the bar is up to date",
	})
	id := &pbresource.ID{Type: BarType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: zip.Id.Name}
	return client.WaitForResourceState(t, id, func(t resourcetest.T, bar *pbresource.Resource) {
		require.Equal(t, zip.Id.Uid, bar.Owner.GetUid(), "the Bar is not the Zip's")
		var data pbfoov1.Bar
		require.NoError(t, bar.Data.UnmarshalTo(&data))
		require.Equal(t, baz, data.Baz)
	})
}

package guide

import (
	"context"
	"testing"
	"time"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/require"
)

// TestSelectedBarController checks that the guide's selected controller
// reconciles the Bars its selector selects and leaves the others alone,
// and that a bad selector is refused when the controller is built.
func TestSelectedBarController(t *testing.T) {
	_, err := selectedBarController("team in payments")
	require.ErrorContains(t, err, "-selector: label selector: at position")

	svc := resourcetest.StartService(t, resourcetest.WithTypes(RegisterTypes))
	c, err := selectedBarController("team=payments")
	require.NoError(t, err)
	m := resourcetest.RunControllers(t, svc.Client, c)
	write := func(name string, labels map[string]string) *pbresource.ID {
		res := svc.Resource(BarType, name).WithData(t, &pbfoov1.Bar{Baz: name}).Build()
		res.Metadata = labels
		rsp, err := svc.Client.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
		require.NoError(t, err)
		return rsp.Resource.Id
	}
	accepted := func(id *pbresource.ID) bool {
		rsp, err := svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
		return err == nil && rsp.Resource.Status["guide.bar"].GetObservedGeneration() == rsp.Resource.Generation
	}
	other := write("other", map[string]string{"team": "search"})
	paid := write("paid", map[string]string{"team": "payments"})
	require.Eventually(t, func() bool { return accepted(paid) }, 5*time.Second, 2*time.Millisecond)
	require.False(t, accepted(other), "a Bar outside the selection was reconciled")
	cached, err := m.Cache().GetByID(other)
	require.NoError(t, err)
	require.Nil(t, cached, "a Bar outside the selection is in the cache")
}

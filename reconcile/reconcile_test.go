package reconcile_test

import (
	"context"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

func TestRequestKeyIgnoresUidAndType(t *testing.T) {
	a := reconcile.Request{ID: &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "p", Namespace: "n"}, Name: "x", Uid: "1"}}
	b := reconcile.Request{ID: &pbresource.ID{Type: foo.BarV2Type, Tenancy: &pbresource.Tenancy{Partition: "p", Namespace: "n"}, Name: "x"}}
	assert.Equal(t, a.Key(), b.Key())
	assert.Equal(t, "p/n/x", a.Key().String())
	c := reconcile.Request{ID: &pbresource.ID{Tenancy: &pbresource.Tenancy{Partition: "p", Namespace: "other"}, Name: "x"}}
	assert.NotEqual(t, a.Key(), c.Key())
}

func TestWriteStatusOnlyWhenChanged(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	rt := reconcile.Runtime{Client: svc.Client}
	ctx := context.Background()
	res := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, svc.Client)

	status := func(reason string) *pbresource.Status {
		return &pbresource.Status{Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE, Reason: reason}}}
	}
	wrote, err := rt.WriteStatus(ctx, res, "test", status("Ok"))
	require.NoError(t, err)
	assert.True(t, wrote)

	client := resourcetest.NewClient(svc.Client)
	current := client.RequireResourceExists(t, res.Id)
	assert.Equal(t, res.Generation, current.Status["test"].ObservedGeneration, "ObservedGeneration comes from the resource")

	wrote, err = rt.WriteStatus(ctx, current, "test", status("Ok"))
	require.NoError(t, err)
	assert.False(t, wrote, "an equal status is not written again")
	client.RequireVersionUnchanged(t, res.Id, current.Version)

	wrote, err = rt.WriteStatus(ctx, current, "test", status("Changed"))
	require.NoError(t, err)
	assert.True(t, wrote)
	client.RequireVersionChanged(t, res.Id, current.Version)
}

// optionRecorder records whether WriteStatus was called with
// resource.ResponseUnread.
type optionRecorder struct {
	pbresource.ResourceServiceClient
	unread []bool
}

func (c *optionRecorder) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	c.unread = append(c.unread, resource.IsResponseUnread(opts))
	return c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
}

// TestWriteStatusResponseUnread checks that Runtime.WriteStatus, which
// reports only whether it wrote, tells the client it will not read the
// response (so the in-process client makes no copy of it).
func TestWriteStatusResponseUnread(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	rec := &optionRecorder{ResourceServiceClient: svc.Client}
	rt := reconcile.Runtime{Client: rec}
	res := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, svc.Client)
	st := &pbresource.Status{Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}}}
	wrote, err := rt.WriteStatus(context.Background(), res, "test", st)
	require.NoError(t, err)
	assert.True(t, wrote)
	assert.Equal(t, []bool{true}, rec.unread)
	current := resourcetest.NewClient(svc.Client).RequireResourceExists(t, res.Id)
	assert.True(t, resource.EqualStatus(st, current.Status["test"]))
}

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// TestResponseUnread checks that resource.ResponseUnread only spares the
// copy of the response: the in-process client returns the stored resource
// (whose version the caller may read), a gRPC client the resource anyway,
// and what is stored is the same either way.
func TestResponseUnread(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	for name, client := range map[string]pbresource.ResourceServiceClient{
		"in-process": env.client,
		"grpc":       grpcClient(t, env),
	} {
		t.Run(name, func(t *testing.T) {
			wrsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, name, "x")}, resource.ResponseUnread())
			require.NoError(t, err)
			stored := env.mustRead(t, barID(name))
			require.True(t, proto.Equal(bar(t, name, "x").Data, stored.Data))

			srsp, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus(stored.Generation)}, resource.ResponseUnread())
			require.NoError(t, err)
			after := env.mustRead(t, barID(name))
			require.True(t, resource.EqualStatus(simpleStatus(stored.Generation), after.Status["k"]))

			if name == "in-process" {
				// The stored resource, uncopied: its version is what a
				// caller that waits for its writes to reach a cache reads.
				require.Equal(t, stored.Version, wrsp.GetResource().GetVersion())
				require.Equal(t, after.Version, srsp.GetResource().GetVersion())
				return
			}
			require.True(t, proto.Equal(stored, wrsp.GetResource()))
			require.True(t, proto.Equal(after, srsp.GetResource()))
		})
	}
}

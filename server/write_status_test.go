package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// TestWriteStatus_UidOfAnotherLifetime: a status write aimed at a Uid the
// name no longer has is refused with FailedPrecondition, one aimed at a
// name with nothing stored with NotFound, and neither writes anything.
func TestWriteStatus_UidOfAnotherLifetime(t *testing.T) {
	env := newEnv(t)
	old := env.write(t, bar(t, "a", "x"))
	require.NoError(t, env.delete(t, old.Id, ""))
	current := env.write(t, bar(t, "a", "y"))
	require.NotEqual(t, old.Id.Uid, current.Id.Uid)

	_, err := env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{Id: old.Id, Key: "k", Status: simpleStatus(old.Generation)})
	requireCode(t, err, codes.FailedPrecondition, "deleted and created again")
	require.True(t, proto.Equal(current, env.mustRead(t, current.Id)), "nothing written")

	missing := resource.CloneID(old.Id)
	missing.Name = "none"
	_, err = env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{Id: missing, Key: "k", Status: simpleStatus(old.Generation)})
	requireCode(t, err, codes.NotFound)

	got := env.writeStatus(t, current.Id, "k", simpleStatus(current.Generation))
	require.Contains(t, got.Status, "k")
}

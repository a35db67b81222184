package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// TestTombstones_ClientsCannotWriteThem: a forged tombstone naming a live
// owner is refused, by Write and MutateAndValidate, while the tombstones
// the service writes can still be read, listed, watched and deleted (the
// reaper does all of that through the API).
func TestTombstones_ClientsCannotWriteThem(t *testing.T) {
	env := newEnv(t)
	owner := env.write(t, zip(t, "owner"))
	child := bar(t, "child", "x")
	child.Owner = owner.Id
	env.write(t, child)

	forged := &pbresource.Resource{Id: TombstoneID(owner.Id), Data: mustAny(t, &pbresource.Tombstone{Owner: owner.Id})}
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: proto.Clone(forged).(*pbresource.Resource)})
	requireCode(t, err, codes.InvalidArgument, `"id.type"`, "resource.v1.Tombstone", "clients cannot write them")
	_, err = env.client.MutateAndValidate(testCtx(t), &pbresource.MutateAndValidateRequest{Resource: proto.Clone(forged).(*pbresource.Resource)})
	requireCode(t, err, codes.InvalidArgument, `"id.type"`)
	require.Empty(t, listTombstones(t, env))

	stream := startWatch(t, env.client, &pbresource.WatchListRequest{
		Type: resource.TypeV1Tombstone, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	requireSnapshot(t, stream, 0)
	require.NoError(t, env.delete(t, owner.Id, ""))
	stones := listTombstones(t, env)
	require.Len(t, stones, 1)
	require.Equal(t, stones[0].Id.Name, recvEvent(t, stream).GetUpsert().GetResource().GetId().GetName())
	env.mustRead(t, stones[0].Id)
	require.NoError(t, env.delete(t, stones[0].Id, ""))
	require.Empty(t, listTombstones(t, env))
}

// TestWrite_TypeURLIsCanonicalised: an Any naming the right message
// without the conventional "type.googleapis.com/" prefix is stored with it,
// so every stored resource's type URL has one form.
func TestWrite_TypeURLIsCanonicalised(t *testing.T) {
	env := newEnv(t)
	const canonical = "type.googleapis.com/loom.example.foo.v1.Zip"
	for _, url := range []string{"loom.example.foo.v1.Zip", "/loom.example.foo.v1.Zip", "example.com/loom.example.foo.v1.Zip", "example.com/x/loom.example.foo.v1.Zip", canonical} {
		t.Run(url, func(t *testing.T) {
			res := zip(t, "z")
			res.Data.TypeUrl = url
			out := env.write(t, res)
			require.Equal(t, canonical, out.Data.TypeUrl)
			require.Equal(t, canonical, env.mustRead(t, res.Id).Data.TypeUrl)

			res = zip(t, "m")
			res.Data.TypeUrl = url
			mv, err := env.client.MutateAndValidate(testCtx(t), &pbresource.MutateAndValidateRequest{Resource: res})
			require.NoError(t, err)
			require.Equal(t, canonical, mv.Resource.Data.TypeUrl)
		})
	}
	// The rewritten form is what later writes compare with: writing the same
	// data with another URL form changes nothing.
	before := env.mustRead(t, zipID("z"))
	res := zip(t, "z")
	res.Data.TypeUrl = "loom.example.foo.v1.Zip"
	require.Equal(t, before.Version, env.write(t, res).Version)

	// Still refused: a URL naming another message.
	res = zip(t, "z")
	res.Data.TypeUrl = "type.googleapis.com/loom.example.foo.v1.Zipper"
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.InvalidArgument, `"data"`)
}

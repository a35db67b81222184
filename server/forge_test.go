package server

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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

// TestErrors_DoNotEchoHugeInput: a request carrying a megabyte of input in
// any field gets a short error that still names the field (issue 8, item
// 5: a 1M-character name came back as a 1,000,071-byte message).
func TestErrors_DoNotEchoHugeInput(t *testing.T) {
	env := newEnv(t)
	stored := env.write(t, bar(t, "a", "x"))
	huge := strings.Repeat("x", 1_000_000)
	hugeUpper := "X" + huge
	ctx := testCtx(t)

	withRes := func(f func(r *pbresource.Resource)) func() error {
		return func() error {
			r := bar(t, "a", "x")
			f(r)
			_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: r})
			return err
		}
	}
	cases := map[string]struct {
		call  func() error
		field string
	}{
		"name":          {withRes(func(r *pbresource.Resource) { r.Id.Name = huge }), "id.name"},
		"kind":          {withRes(func(r *pbresource.Resource) { r.Id.Type.Kind = hugeUpper }), "id.type"},
		"unknown kind":  {withRes(func(r *pbresource.Resource) { r.Id.Type.Kind = "B" + huge }), "id.type"},
		"group":         {withRes(func(r *pbresource.Resource) { r.Id.Type.Group = huge }), "id.type"},
		"group version": {withRes(func(r *pbresource.Resource) { r.Id.Type.GroupVersion = "v" + huge + "1" }), "id.type"},
		"namespace":     {withRes(func(r *pbresource.Resource) { r.Id.Tenancy.Namespace = huge }), "id.tenancy.namespace"},
		"partition":     {withRes(func(r *pbresource.Resource) { r.Id.Tenancy.Partition = hugeUpper }), "id.tenancy.partition"},
		"uid":           {withRes(func(r *pbresource.Resource) { r.Id.Uid = huge }), "id.uid"},
		"owner name":    {withRes(func(r *pbresource.Resource) { r.Owner = barID(huge) }), "owner.name"},
		"owner kind":    {withRes(func(r *pbresource.Resource) { r.Owner = barID("o"); r.Owner.Type.Kind = hugeUpper }), "owner.type"},
		"owner uid":     {withRes(func(r *pbresource.Resource) { r.Owner = barID("o"); r.Owner.Uid = huge }), "owner.uid"},
		"type URL":      {withRes(func(r *pbresource.Resource) { r.Data.TypeUrl = "type.googleapis.com/" + huge }), "data"},
		"version": {withRes(func(r *pbresource.Resource) {
			r.Id.Name = "missing"
			r.Version = huge
		}), ""},
		"version on update": {withRes(func(r *pbresource.Resource) { r.Version = huge }), ""},
		"metadata key": {withRes(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{huge: "v"}
		}), "metadata"},
		"finalizer name": {withRes(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{resource.FinalizerKey: huge}
		}), "metadata.finalizers"},
		"read name": {func() error {
			_, err := env.client.Read(ctx, &pbresource.ReadRequest{Id: barID(huge)})
			return err
		}, "id.name"},
		"delete version": {func() error {
			_, err := env.client.Delete(ctx, &pbresource.DeleteRequest{Id: barID("a"), Version: huge})
			return err
		}, ""},
		"list namespace": {func() error {
			_, err := env.client.List(ctx, &pbresource.ListRequest{Type: barID("a").Type, Tenancy: &pbresource.Tenancy{Namespace: hugeUpper}})
			return err
		}, "tenancy.namespace"},
		"list kind": {func() error {
			typ := proto.Clone(barID("a").Type).(*pbresource.Type)
			typ.Kind = "B" + huge
			_, err := env.client.List(ctx, &pbresource.ListRequest{Type: typ})
			return err
		}, "type"},
		"status key": {func() error {
			_, err := env.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: huge, Status: simpleStatus(stored.Generation)})
			return err
		}, "key"},
		"status key unprintable": {func() error {
			_, err := env.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: strings.Repeat("\x00", 200), Status: simpleStatus(stored.Generation)})
			return err
		}, "key"},
		"observed generation": {func() error {
			_, err := env.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus(huge)})
			return err
		}, "status.observed_generation"},
		"status version": {func() error {
			_, err := env.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus(stored.Generation), Version: huge})
			return err
		}, ""},
		"fence": {func() error {
			fctx := metadata.NewOutgoingContext(ctx, metadata.Pairs(resource.FenceMetadataKey, huge))
			_, err := env.server.Write(metadata.NewIncomingContext(fctx, metadata.Pairs(resource.FenceMetadataKey, huge)),
				&pbresource.WriteRequest{Resource: bar(t, "a", "x")})
			return err
		}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			msg := err.Error()
			require.Less(t, len(msg), 600, "message: %.2000s", msg)
			if tc.field != "" {
				require.Contains(t, msg, `"`+tc.field)
			}
		})
	}
}

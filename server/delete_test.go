package server

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func TestDelete_Idempotent(t *testing.T) {
	env := newEnv(t)
	require.NoError(t, env.delete(t, barID("missing"), ""))
	require.NoError(t, env.delete(t, barID("missing"), "42"))
	id := barID("missing")
	id.Uid = resource.NewULID()
	require.NoError(t, env.delete(t, id, ""))

	env.write(t, bar(t, "a", "x"))
	require.NoError(t, env.delete(t, barID("a"), ""))
	require.NoError(t, env.delete(t, barID("a"), ""))
	_, err := env.read(t, barID("a"))
	requireCode(t, err, codes.NotFound)
}

func TestDelete_VersionAndUid(t *testing.T) {
	env := newEnv(t)
	res := env.write(t, bar(t, "a", "x"))

	requireCode(t, env.delete(t, barID("a"), res.Version+"1"), codes.Aborted, "version")
	withUid := proto.Clone(res.Id).(*pbresource.ID)
	requireCode(t, env.delete(t, withUid, res.Version+"1"), codes.Aborted, "version")

	wrongUid := barID("a")
	wrongUid.Uid = resource.NewULID()
	requireCode(t, env.delete(t, wrongUid, ""), codes.FailedPrecondition, "uid")
	requireCode(t, env.delete(t, wrongUid, res.Version), codes.FailedPrecondition, "uid")

	require.Equal(t, res.Version, env.mustRead(t, barID("a")).Version, "nothing changed")
	require.NoError(t, env.delete(t, withUid, res.Version))
	_, err := env.read(t, barID("a"))
	requireCode(t, err, codes.NotFound)
}

func listTombstones(t *testing.T, env *testEnv) []*pbresource.Resource {
	t.Helper()
	out, err := env.client.List(testCtx(t), &pbresource.ListRequest{
		Type:    resource.TypeV1Tombstone,
		Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	require.NoError(t, err)
	return out.Resources
}

func TestDelete_Tombstone(t *testing.T) {
	env := newEnv(t)
	longName := strings.Repeat("o", resource.MaxNameLength)
	ownerRes := bar(t, longName, "x")
	ownerRes.Id.Tenancy.Namespace = "team"
	owner := env.write(t, ownerRes)

	child := bar(t, "child", "x")
	child.Owner = owner.Id
	env.write(t, child)

	// Owning nothing leaves no tombstone.
	env.write(t, bar(t, "loner", "x"))
	require.NoError(t, env.delete(t, barID("loner"), ""))
	require.Empty(t, listTombstones(t, env))

	require.NoError(t, env.delete(t, owner.Id, ""))
	stones := listTombstones(t, env)
	require.Len(t, stones, 1)
	ts := stones[0]
	require.Equal(t, "tombstone-"+strings.ToLower(owner.Id.Uid), ts.Id.Name)
	require.NoError(t, resource.ValidateName(ts.Id.Name))
	require.Equal(t, &pbresource.Tenancy{Partition: "default", Namespace: "team"}, ts.Id.Tenancy)
	require.True(t, resource.IsULID(ts.Id.Uid))
	var data pbresource.Tombstone
	require.NoError(t, ts.Data.UnmarshalTo(&data))
	require.True(t, proto.Equal(owner.Id, data.Owner), "the tombstone names the owner with its Uid")

	// The child stays for the reaper.
	env.mustRead(t, barID("child"))

	// Tombstones can be deleted directly.
	require.NoError(t, env.delete(t, ts.Id, ""))
	require.Empty(t, listTombstones(t, env))
}

func TestDelete_TombstoneTenancy(t *testing.T) {
	env := newEnv(t)
	for name, tc := range map[string]struct {
		owner *pbresource.Resource
		want  *pbresource.Tenancy
	}{
		"partition-scoped": {func() *pbresource.Resource { r := zip(t, "z"); r.Id.Tenancy.Partition = "p1"; return r }(),
			&pbresource.Tenancy{Partition: "p1", Namespace: "default"}},
		"cluster-scoped": {qux(t, "q"), &pbresource.Tenancy{Partition: "default", Namespace: "default"}},
	} {
		t.Run(name, func(t *testing.T) {
			owner := env.write(t, tc.owner)
			child := bar(t, "child-"+strings.ToLower(owner.Id.Uid[20:]), "x")
			child.Owner = owner.Id
			env.write(t, child)
			require.NoError(t, env.delete(t, owner.Id, ""))
			ts, err := env.read(t, TombstoneID(owner.Id))
			require.NoError(t, err)
			require.Equal(t, tc.want, ts.Id.Tenancy)
		})
	}
}

func TestTombstoneID_NonULIDUid(t *testing.T) {
	id := TombstoneID(&pbresource.ID{Uid: "Not A ULID_" + strings.Repeat("x", 80), Name: "n"})
	require.NoError(t, resource.ValidateName(id.Name))
}

func TestFinalizers(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)

	res := bar(t, "a", "x")
	res.Metadata = map[string]string{resource.FinalizerKey: "f1 f2", "keep": "me"}
	created := env.write(t, res)
	owned := bar(t, "owned", "x")
	owned.Owner = created.Id
	env.write(t, owned)

	// Delete marks instead of deleting.
	require.NoError(t, env.delete(t, barID("a"), ""))
	marked := env.mustRead(t, barID("a"))
	require.True(t, resource.IsMarkedForDeletion(marked))
	ts, err := time.Parse(time.RFC3339, marked.Metadata[resource.DeletionTimestampKey])
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), ts, time.Minute)
	require.NotEqual(t, created.Generation, marked.Generation)
	require.Equal(t, created.Id.Uid, marked.Id.Uid)

	// Deleting again changes nothing.
	require.NoError(t, env.delete(t, barID("a"), ""))
	require.Equal(t, marked.Version, env.mustRead(t, barID("a")).Version)

	write := func(mod func(r *pbresource.Resource)) error {
		r := env.mustRead(t, barID("a"))
		r.Version = ""
		mod(r)
		_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: r})
		return err
	}
	// Changing anything but removing finalizers is InvalidArgument, as in
	// Consul, and the error names the field.
	requireCode(t, write(func(r *pbresource.Resource) { r.Data = mustAny(t, decodeBarWith("changed")) }),
		codes.InvalidArgument, field("data"), "marked for deletion")
	requireCode(t, write(func(r *pbresource.Resource) { r.Metadata[resource.FinalizerKey] = "f1 f2 f3" }),
		codes.InvalidArgument, field("metadata.finalizers"), "f3", "marked for deletion")
	requireCode(t, write(func(r *pbresource.Resource) { r.Metadata["keep"] = "changed" }),
		codes.InvalidArgument, field("metadata"), "marked for deletion")
	requireCode(t, write(func(r *pbresource.Resource) { r.Metadata["new"] = "x" }),
		codes.InvalidArgument, field("metadata"), "marked for deletion")
	requireCode(t, write(func(r *pbresource.Resource) { delete(r.Metadata, "keep") }),
		codes.InvalidArgument, field("metadata"), "marked for deletion")
	requireCode(t, write(func(r *pbresource.Resource) { delete(r.Metadata, resource.DeletionTimestampKey) }),
		codes.InvalidArgument, field("metadata.deletionTimestamp"))
	requireCode(t, write(func(r *pbresource.Resource) {
		r.Metadata[resource.DeletionTimestampKey] = "2000-01-01T00:00:00Z"
		r.Metadata[resource.FinalizerKey] = "f1"
	}), codes.InvalidArgument, field("metadata.deletionTimestamp"))
	require.Equal(t, marked.Version, env.mustRead(t, barID("a")).Version, "refused writes changed nothing")

	// A no-op write and a status write are fine.
	require.NoError(t, write(func(*pbresource.Resource) {}))
	require.Equal(t, marked.Version, env.mustRead(t, barID("a")).Version)
	env.writeStatus(t, marked.Id, "ctl", simpleStatus(marked.Generation))

	// Removing one finalizer (reordering the rest is fine).
	require.NoError(t, write(func(r *pbresource.Resource) { r.Metadata[resource.FinalizerKey] = "f2" }))
	still := env.mustRead(t, barID("a"))
	require.Equal(t, []string{"f2"}, resource.Finalizers(still))
	require.Empty(t, listTombstones(t, env))

	// Removing the last one deletes the resource, leaving a tombstone since
	// it owns one.
	out, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: func() *pbresource.Resource {
		r := proto.Clone(still).(*pbresource.Resource)
		delete(r.Metadata, resource.FinalizerKey)
		r.Version = still.Version
		return r
	}()})
	require.NoError(t, err)
	require.Empty(t, resource.Finalizers(out.Resource))
	_, err = env.read(t, barID("a"))
	requireCode(t, err, codes.NotFound)
	stones := listTombstones(t, env)
	require.Len(t, stones, 1)
	require.Equal(t, TombstoneID(created.Id).Name, stones[0].Id.Name)
}

func TestFinalizers_EmptyValueDeletes(t *testing.T) {
	env := newEnv(t)
	res := bar(t, "a", "x")
	res.Metadata = map[string]string{resource.FinalizerKey: "f"}
	env.write(t, res)
	require.NoError(t, env.delete(t, barID("a"), ""))
	r := env.mustRead(t, barID("a"))
	r.Metadata[resource.FinalizerKey] = " "
	r.Version = ""
	env.write(t, r)
	_, err := env.read(t, barID("a"))
	requireCode(t, err, codes.NotFound)
	require.Empty(t, listTombstones(t, env))
}

package conformance

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

func (s *suite) testOwnerReferences(t *testing.T) {
	b := s.newBackend(t)
	ctx := context.Background()

	owner := write(t, b, newDefault("owner"))
	owned := func(name string, ownerID *pbresource.ID) *pbresource.Resource {
		res := newResource(albumV1, "default", "default", name)
		res.Owner = proto.Clone(ownerID).(*pbresource.ID)
		return write(t, b, res)
	}
	refs := func(id *pbresource.ID) []string {
		t.Helper()
		got, err := b.OwnerReferences(ctx, id)
		require.NoError(t, err)
		var out []string
		for _, ref := range got {
			out = append(out, key(ref)+"@"+ref.Uid)
		}
		sort.Strings(out)
		return out
	}
	ref := func(res *pbresource.Resource) string { return key(res.Id) + "@" + res.Id.Uid }

	require.Empty(t, refs(owner.Id), "owns nothing yet")
	var got []*pbresource.ID

	c1 := owned("c1", owner.Id)
	c2 := owned("c2", owner.Id)
	// An owner reference to another lifetime of the owner's name is
	// refused: the owner must exist.
	earlier := proto.Clone(owner.Id).(*pbresource.ID)
	earlier.Uid = newUid()
	c3 := newResource(albumV1, "default", "default", "c3")
	c3.Owner = earlier
	_, err := b.WriteCAS(ctx, c3)
	require.ErrorIs(t, err, storage.ErrOwnerNotFound)
	// An owner of another type with the same name, and one not owned at all.
	otherOwner := write(t, b, newResource(albumV1, "default", "default", "owner"))
	c4 := owned("c4", otherOwner.Id)
	write(t, b, newResource(albumV1, "default", "default", "c5"))

	require.Equal(t, []string{ref(c1), ref(c2)}, refs(owner.Id))
	require.Empty(t, refs(earlier))
	_, err = b.Read(ctx, storage.EventualConsistency, c3.Id)
	require.ErrorIs(t, err, storage.ErrNotFound, "a refused write stores nothing")
	require.Equal(t, []string{ref(c4)}, refs(otherOwner.Id))

	got, err = b.OwnerReferences(ctx, owner.Id)
	require.NoError(t, err)
	for _, id := range got {
		if id.Name == "c1" {
			requireProtoEqual(t, c1.Id, id, "owner references are the owned resources' IDs")
		}
	}

	// Updating an owned resource keeps it listed once.
	c2 = update(t, b, c2, "k", "v")
	require.Equal(t, []string{ref(c1), ref(c2)}, refs(owner.Id))

	// Deleting an owned resource removes it.
	require.NoError(t, b.DeleteCAS(ctx, c1.Id, c1.Version))
	require.Equal(t, []string{ref(c2)}, refs(owner.Id))

	// Deleting the owner leaves the references of what it still owns, so
	// a cascading delete can find them.
	require.NoError(t, b.DeleteCAS(ctx, owner.Id, owner.Version))
	require.Equal(t, []string{ref(c2)}, refs(owner.Id))

	// A new lifetime of the owner's name owns nothing of the old one.
	reborn := write(t, b, newDefault("owner"))
	require.Empty(t, refs(reborn.Id))
	require.NoError(t, b.DeleteCAS(ctx, c2.Id, ""))
	require.Empty(t, refs(owner.Id))
}
